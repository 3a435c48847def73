package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag of a number of bytes, with an optional unit: 512MiB,
// 1GiB, 100MB, 65536.
type byteSize int64

var byteUnits = []struct {
	suffix string
	factor int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1},
}

func (b *byteSize) Set(s string) error {
	text := strings.TrimSpace(s)
	factor := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(strings.ToUpper(text), strings.ToUpper(u.suffix)) {
			text, factor = strings.TrimSpace(text[:len(text)-len(u.suffix)]), u.factor
			break
		}
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/factor {
		return fmt.Errorf("%q: want a positive size such as 512MiB, 1GiB or 1048576", s)
	}
	*b = byteSize(n * factor)
	return nil
}

func (b *byteSize) String() string {
	switch n := int64(*b); {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	default:
		return strconv.FormatInt(n, 10)
	}
}
