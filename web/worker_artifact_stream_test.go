package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/artifact/artifacttest"
)

// TestArtifactUploadEndlessBody streams a 1 GB upload that is generated as
// it is sent: the server must answer 413 having read little more than the
// limit, with the heap flat. Not parallel: other tests' allocations would
// blur the heap measurement; the backends one after the other.
func TestArtifactUploadEndlessBody(t *testing.T) {
	for _, kind := range []string{kindDir, kindS3} {
		t.Run(kind, func(t *testing.T) {
			f := setupArtifactsOn(t, kind)
			l := f.claim(t)
			const boundary = "xyzzy"
			head := fmt.Sprintf("--%s\r\nContent-Disposition: form-data; name=\"lease_token\"\r\n\r\n%d\r\n"+
				"--%[1]s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.png\"\r\n\r\n", boundary, l.Token)
			// A PNG's signature and IHDR, so that only the size can stop it.
			body := &artifacttest.Stream{Prefix: append([]byte(head), artifacttest.PNGDeclaring(100, 100)[:33]...), Size: 1 << 30}

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			peak := sampleHeap(t)

			ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+uploadPath(l.JobID), body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1 // chunked: the server cannot refuse it from a header
			req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
			req.Header.Set("Authorization", "Bearer "+f.worker)
			start := time.Now()
			res, err := f.srv.Client().Do(req)
			if err != nil {
				t.Fatalf("upload: %v (after %d bytes)", err, body.Pulled())
			}
			defer res.Body.Close()
			answer, _ := io.ReadAll(res.Body)
			elapsed := time.Since(start)
			peakHeap := peak()

			if res.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("status %d, want 413; body %s", res.StatusCode, answer)
			}
			growth := int64(peakHeap) - int64(before.HeapAlloc)
			t.Logf("1 GiB body: %d, %s; pulled %.1f MiB from the body in %v; heap before %.1f MiB, peak %.1f MiB (growth %.1f MiB)",
				res.StatusCode, answer, mib(body.Pulled()), elapsed, mib(int64(before.HeapAlloc)), mib(int64(peakHeap)), mib(growth))
			if growth > 64<<20 {
				t.Errorf("heap grew by %.1f MiB reading the upload", mib(growth))
			}
			// The limit is 10 MiB; what the client wrote beyond that sits in
			// socket buffers, never in the server.
			if body.Pulled() > 64<<20 {
				t.Errorf("the client sent %.1f MiB before the server gave up", mib(body.Pulled()))
			}
			if files := f.files(t); len(files) != 0 {
				t.Errorf("a refused upload left files: %v", files)
			}
		})
	}
}

// sampleHeap polls the heap until the returned function is called, which
// returns the largest HeapAlloc seen.
func sampleHeap(t *testing.T) func() uint64 {
	t.Helper()
	var (
		mu   sync.Mutex
		peak uint64
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			mu.Lock()
			peak = max(peak, m.HeapAlloc)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	result := func() uint64 {
		once.Do(func() { close(stop); <-done })
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
	t.Cleanup(func() { result() })
	return result
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
