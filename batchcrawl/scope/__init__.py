"""The crawl scope: the URL filter chain used by inject, generate and fetch alike."""
