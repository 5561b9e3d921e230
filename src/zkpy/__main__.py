"""``python -m zkpy``: the ``zkpy`` command (the same click group, so the same commands and help)."""

from zkpy.cli.main import main

if __name__ == "__main__":
    main(prog_name="zkpy")
