DROP FUNCTION availability_fits(timestamptz, integer, timestamptz);
DROP FUNCTION availability_claimable(text, text[], timestamptz);
DROP FUNCTION availability_closes(text, integer[], integer[], timestamptz);
DROP TABLE availability_windows;
