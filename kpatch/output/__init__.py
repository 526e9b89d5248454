"""What kpatch shows: the console (rich on a terminal, plain text otherwise), help text, redaction."""
