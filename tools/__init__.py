"""The book's build tooling (not part of the installed package): ``python -m tools.notebooks`` executes the
chapters and renders the book; ``tools.slides`` turns the course sessions into slide decks."""
