"""Release lines: which patch is on which line (matrix.py), and patches carried from one line to another
(backport.py)."""
