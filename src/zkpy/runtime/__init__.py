"""The shell: the only server code that touches asyncio, sockets, clocks and files."""
