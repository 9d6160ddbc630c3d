"""The test page's size limits, apart from the builder so declarations can name them cheaply."""

DEFAULT_TOTAL_BYTES = 7_000_000
MIN_TOTAL_BYTES = 64 * 1024
# Bounded so every image stays within JPEG's 65535-pixel sides and the build within memory.
MAX_TOTAL_BYTES = 1 << 30
