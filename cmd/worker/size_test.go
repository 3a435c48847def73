package main

import "testing"

func TestByteSize(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{
		"512MiB": 512 << 20, "1GiB": 1 << 30, "64KiB": 64 << 10, "100MB": 100_000_000, "2G": 2 << 30,
		"1048576": 1 << 20, " 10 MiB ": 10 << 20, "100b": 100,
	} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("Set(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, in := range []string{"", "0", "-1MiB", "lots", "1.5GiB", "99999999999GiB"} {
		var b byteSize
		if err := b.Set(in); err == nil {
			t.Errorf("Set(%q) = %d, want an error", in, b)
		}
	}
	if s := byteSize(512 << 20); s.String() != "512MiB" {
		t.Errorf("String() = %q", s.String())
	}
}
