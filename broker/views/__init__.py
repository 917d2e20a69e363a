"""Tag-filtered views (MetaQ §7.3): read-only topics over a source topic's consume queue."""
