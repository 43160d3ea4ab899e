"""Read-only SQLite access: connection, authorizer guard, introspection, paged cursor."""
