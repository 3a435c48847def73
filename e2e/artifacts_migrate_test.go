package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/leasehold/leasehold/internal/s3test"
)

// `server artifacts migrate` copies a directory of 10,000 artifact files
// to a bucket on a real SeaweedFS. It is killed (kill -9) mid-copy, then
// run again: the second run skips exactly what the first had put there
// and copies the rest, and every object in the bucket, read back, hashes
// to its name and has its file's size.
func TestArtifactsMigrateKilledAndResumed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{t: t, ctx: ctx}
	const n = 10000
	root := filepath.Join(t.TempDir(), "artifacts")
	want := make(map[string]int64, n)
	for i := range n {
		b := make([]byte, 512+i%3584) // 0.5 to 4 KiB
		_, _ = rand.Read(b)
		s := sha256.Sum256(b)
		sum := hex.EncodeToString(s[:])
		p := filepath.Join(root, "objects", sum[:2], sum)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o640); err != nil {
			t.Fatal(err)
		}
		want[sum] = int64(len(b))
	}
	srv := s3test.Start(t)
	var r [4]byte
	_, _ = rand.Read(r[:])
	bucket := "migrate-" + hex.EncodeToString(r[:])
	args := []string{"artifacts", "migrate", "--artifacts", root, "--to", "s3://" + bucket + "/lh"}
	objects := func() int {
		keys, err := s3test.Keys(ctx, srv, bucket)
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}

	// The first run, killed once it has reported 3,000.
	start := time.Now()
	first := e.spawn("server artifacts migrate", args, srv.Env()...)
	e.eventually("the first run past 3,000 objects", 5*time.Minute, func() bool {
		return regexp.MustCompile(`copied [3-9]\d{3} objects`).MatchString(first.out.String())
	})
	first.signal(t, syscall.SIGKILL)
	if err := first.wait(t, 10*time.Second); err == nil {
		t.Fatal("the killed run exited 0")
	}
	killedAfter := time.Since(start)
	there := objects()
	t.Logf("first run killed (SIGKILL) after %v with %d of %d objects in the bucket", killedAfter.Round(time.Millisecond), there, n)
	if there == 0 || there >= n {
		t.Fatalf("%d objects in the bucket at the kill: not mid-copy", there)
	}

	// The second run, to the end.
	start = time.Now()
	second := e.spawn("server artifacts migrate", args, srv.Env()...)
	if err := second.wait(t, 8*time.Minute); err != nil {
		t.Fatalf("the resumed run: %v\n%s", err, second.out.String())
	}
	// Its last line is the total (progress goes before it, every 1,000).
	all := regexp.MustCompile(`copied (\d+) objects \((\d+) bytes\), each read back and verified; skipped (\d+) already there`).FindAllStringSubmatch(second.out.String(), -1)
	if all == nil {
		t.Fatalf("the resumed run printed:\n%s", second.out.String())
	}
	m := all[len(all)-1]
	copied, _ := strconv.Atoi(m[1])
	skipped, _ := strconv.Atoi(m[3])
	t.Logf("resumed run: copied %d, skipped %d, in %v", copied, skipped, time.Since(start).Round(time.Millisecond))
	if skipped != there || copied+skipped != n {
		t.Errorf("resumed run copied %d and skipped %d; the bucket had %d of %d", copied, skipped, there, n)
	}

	// Every object read back and hashed.
	start = time.Now()
	c, err := s3test.Client(srv)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s3test.Keys(ctx, srv, bucket)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != n {
		t.Fatalf("%d objects in the bucket, want %d", len(keys), n)
	}
	work := make(chan string)
	var mu sync.Mutex
	var bad []string
	verified := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for key := range work {
				sum := filepath.Base(key)
				err := func() error {
					o, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
					if err != nil {
						return err
					}
					defer o.Close()
					h := sha256.New()
					size, err := io.Copy(h, o)
					if err != nil {
						return err
					}
					if got := hex.EncodeToString(h.Sum(nil)); got != sum || size != want[sum] || key != "lh/objects/"+sum[:2]+"/"+sum {
						return fmt.Errorf("%d bytes hashing to %s, want %d", size, got, want[sum])
					}
					return nil
				}()
				mu.Lock()
				if err != nil {
					bad = append(bad, key+": "+err.Error())
				} else {
					verified++
				}
				mu.Unlock()
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	t.Logf("%d objects read back and hashed in %v", verified, time.Since(start).Round(time.Millisecond))
	if len(bad) > 0 {
		t.Errorf("%d objects wrong, first: %s", len(bad), bad[0])
	}
}
