"""Text safety and shape: the prompt-injection sanitizer (`sanitize`), key scrubbing (`scrub`),
the result cap (`output`), the one web-link rule (`urls`) and the UTC timestamp (`stamps`).
Pure functions; they import nothing of the package but `errors`."""
