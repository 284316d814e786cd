"""Python op builders for kgc's dialects, generated from their ODS."""
