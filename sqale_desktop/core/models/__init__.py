"""Model catalog, hub downloads, the local registry, secrets and GGUF conversion."""
