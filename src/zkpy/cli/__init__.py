"""The ``zkpy`` command."""
