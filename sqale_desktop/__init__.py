"""SQaLe Desktop: ask questions about local SQLite databases, answered by a local text-to-SQL agent."""

__version__ = "0.1.0"
