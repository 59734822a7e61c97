"""Paper configurations, one module per experiment, each with ``get_config()``."""
