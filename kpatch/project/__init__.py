"""The user's project: where things live (workspace), the run state, journals and the writer lock."""
