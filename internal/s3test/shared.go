package s3test

import (
	"context"
	"net/url"
	"os"
	"sync"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// shared is the one server of a test binary (see Shared).
var shared struct {
	once sync.Once
	srv  *Server
	stop func()
	err  error
}

// Shared returns a server for the whole test binary, started on first
// use: tests give themselves a bucket each. The package's TestMain must
// end with Main, which stops it.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		var st stopper
		shared.srv, shared.err = startFor(&st)
		shared.stop = st.run
	})
	if shared.err != nil {
		t.Fatalf("starting SeaweedFS: %v", shared.err)
	}
	return shared.srv
}

// Main runs the tests and stops the shared server: a package's TestMain
// is `func TestMain(m *testing.M) { s3test.Main(m) }`.
func Main(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

// stopper collects cleanups outside a test.
type stopper struct{ fns []func() }

func (s *stopper) Cleanup(fn func()) { s.fns = append(s.fns, fn) }

func (s *stopper) run() {
	for i := len(s.fns) - 1; i >= 0; i-- {
		s.fns[i]()
	}
}

// Client is a client of srv signed as the test identity.
func Client(srv *Server) (*minio.Client, error) {
	u, err := url.Parse(srv.Endpoint)
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
}

// Keys lists every key of bucket.
func Keys(ctx context.Context, srv *Server, bucket string) ([]string, error) {
	c, err := Client(srv)
	if err != nil {
		return nil, err
	}
	var out []string
	for oi := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if oi.Err != nil {
			return nil, oi.Err
		}
		out = append(out, oi.Key)
	}
	return out, nil
}
