package queue

// CleanText makes a message storable as PostgreSQL text (no NUL, valid
// UTF-8), cut to at most limit bytes.
func CleanText(s string, limit int) string { return cleanText(s, limit) }
