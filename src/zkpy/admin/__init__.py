"""Operations surfaces: four-letter words (and later the admin HTTP server and metrics)."""
