"""Persistence: typed models, engine factory and Alembic migrations."""
