package artifact_test

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact/artifacttest"
)

// screenshotOf is a well-formed PNG of a phone's screen (1080×2340
// declared) whose image data is size random bytes: incompressible, and
// distinct each call, so that every upload is new content (no dedup).
// The store walks a PNG's chunks and never decodes them, so random data
// is as good as pixels here.
func screenshotOf(size int) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, 1080)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 2340)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	artifacttest.PNGChunk(&b, "IHDR", ihdr)
	data := make([]byte, size)
	_, _ = rand.Read(data)
	artifacttest.PNGChunk(&b, "IDAT", data)
	artifacttest.PNGChunk(&b, "IEND", nil)
	return b.Bytes()
}

// opStats is the throughput and latency of one operation over a run.
type opStats struct {
	n       int
	bytes   int64
	elapsed time.Duration
	lat     []time.Duration
}

func (s *opStats) add(size int64, d time.Duration) {
	s.n++
	s.bytes += size
	s.elapsed += d
	s.lat = append(s.lat, d)
}

func (s *opStats) quantile(q float64) time.Duration {
	l := slices.Clone(s.lat)
	slices.Sort(l)
	return l[min(int(q*float64(len(l))), len(l)-1)]
}

func (s *opStats) String() string {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("%4d ops %7.1f MB/s  p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms",
		s.n, float64(s.bytes)/1e6/s.elapsed.Seconds(), ms(s.quantile(0.5)), ms(s.quantile(0.99)), ms(s.quantile(1)))
}

// Upload (Store.Put: spool, check, place, record) and serve (Store.Open
// and the whole object read) throughput, the directory and S3 (the
// package's SeaweedFS on this machine) in one run, one operation at a
// time, screenshots of two sizes. MB/s counts the bytes moved over the
// time spent in the operations (the database writes and reads
// included: that is what an upload or a GET /artifacts/{id} costs). Not run by default (it moves ~200 MB):
//
//	LEASEHOLD_BENCH_STORAGE=1 go test ./artifact -run TestStorageThroughput -v
func TestStorageThroughput(t *testing.T) {
	if os.Getenv("LEASEHOLD_BENCH_STORAGE") == "" {
		t.Skip("set LEASEHOLD_BENCH_STORAGE=1 to measure")
	}
	sizes := []struct {
		name string
		size int
		n    int
	}{{"64KiB", 64 << 10, 200}, {"1MiB", 1 << 20, 100}}
	// Prepared before any timing; both backends get the same contents,
	// each into storage of its own (so no dedup either).
	var shots [][][]byte
	for _, sz := range sizes {
		var s [][]byte
		for range sz.n {
			s = append(s, screenshotOf(sz.size))
		}
		shots = append(shots, s)
	}
	for _, kind := range []string{kindDir, kindS3} {
		f := setupOn(t, kind)
		l := f.lease(t)
		// The first write to new storage is not timed: SeaweedFS grows
		// the bucket's volumes then (seconds), once per bucket.
		start := time.Now()
		if _, err := f.store.Put(f.ctx, l, "screen.png", bytes.NewReader(screenshotOf(1<<10))); err != nil {
			t.Fatal(err)
		}
		t.Logf("%-3s first write (not counted): %v", kind, time.Since(start).Round(100*time.Microsecond))
		for i, sz := range sizes {
			var put, get opStats
			var ids []int64
			for _, shot := range shots[i] {
				start := time.Now()
				a, err := f.store.Put(f.ctx, l, "screen.png", bytes.NewReader(shot))
				d := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				put.add(int64(len(shot)), d)
				ids = append(ids, a.ID)
			}
			for _, id := range ids {
				start := time.Now()
				_, r, err := f.store.Open(f.ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				n, err := io.Copy(io.Discard, r)
				_ = r.Close()
				d := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				get.add(n, d)
			}
			t.Logf("%-3s %-5s upload %s", kind, sz.name, &put)
			t.Logf("%-3s %-5s serve  %s", kind, sz.name, &get)
		}
	}
}
