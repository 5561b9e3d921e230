"""The request pipeline as a pure core: connections, prep, commit gate, final, sessions."""
