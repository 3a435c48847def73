package artifact

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says where an S3 backend keeps its objects and how it signs
// in. An empty Endpoint is AWS's, found from Region.
type S3Config struct {
	// Bucket and Prefix: objects are Prefix/objects/<sha[0:2]>/<sha256>.
	Bucket, Prefix string
	// Endpoint is the server's URL (http://host:port or https://...).
	Endpoint string
	// Region defaults to us-east-1.
	Region string
	// AccessKey and SecretKey (and SessionToken) sign the requests; when
	// empty, the AWS shared credentials file and the instance role are
	// tried.
	AccessKey, SecretKey, SessionToken string
	// PathStyle addresses the bucket in the path (host/bucket/key), as
	// self-hosted servers need, rather than in the host name.
	PathStyle bool
	// SpoolDir holds uploads in progress on local disk (default: the
	// system's temporary directory).
	SpoolDir string
}

// ParseS3URL splits s3://bucket/prefix into the bucket and the prefix
// (without slashes at either end); ok is false for anything not s3://.
func ParseS3URL(raw string) (bucket, prefix string, ok bool, err error) {
	if !strings.HasPrefix(raw, "s3://") {
		return "", "", false, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", true, fmt.Errorf("%q: want s3://bucket or s3://bucket/prefix", raw)
	}
	return u.Host, strings.Trim(u.Path, "/"), true, nil
}

// S3ConfigFromEnv is the configuration of s3://bucket/prefix with the
// usual variables: AWS_ENDPOINT_URL, AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, and
// LEASEHOLD_S3_PATH_STYLE=true.
func S3ConfigFromEnv(raw string, getenv func(string) string) (S3Config, error) {
	bucket, prefix, ok, err := ParseS3URL(raw)
	if err != nil {
		return S3Config{}, err
	}
	if !ok {
		return S3Config{}, fmt.Errorf("%q is not an s3:// URL", raw)
	}
	cfg := S3Config{
		Bucket: bucket, Prefix: prefix,
		Endpoint:  getenv("AWS_ENDPOINT_URL"),
		Region:    cmpOr(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION")),
		AccessKey: getenv("AWS_ACCESS_KEY_ID"), SecretKey: getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"),
	}
	switch v := getenv("LEASEHOLD_S3_PATH_STYLE"); v {
	case "", "false", "0":
	case "true", "1":
		cfg.PathStyle = true
	default:
		return S3Config{}, fmt.Errorf("LEASEHOLD_S3_PATH_STYLE=%q: want true or false", v)
	}
	return cfg, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// S3 keeps objects in an S3-compatible bucket. Uploads are spooled on
// local disk (checked there, then sent with their length known: one PUT,
// nothing held in memory).
type S3 struct {
	c              *minio.Client
	bucket, prefix string
	spool          string
}

// NewS3 connects to cfg's server and creates the bucket when it is
// missing.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	endpoint, secure := "s3.amazonaws.com", true
	if cfg.Region != "" && cfg.Endpoint == "" {
		endpoint = "s3." + cfg.Region + ".amazonaws.com"
	}
	if cfg.Endpoint != "" {
		u, err := url.Parse(cfg.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("AWS_ENDPOINT_URL %q: want http://host[:port] or https://host[:port]", cfg.Endpoint)
		}
		endpoint, secure = u.Host, u.Scheme == "https"
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	if cfg.AccessKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.FileAWSCredentials{}, &credentials.IAM{},
		})
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	c, err := minio.New(endpoint, &minio.Options{
		Creds: creds, Secure: secure, Region: cmpOr(cfg.Region, "us-east-1"), BucketLookup: lookup,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	s := &S3{c: c, bucket: cfg.Bucket, prefix: cfg.Prefix, spool: cmpOr(cfg.SpoolDir, os.TempDir())}
	if s.prefix != "" {
		s.prefix += "/"
	}
	if err := os.MkdirAll(s.spool, 0o750); err != nil {
		return nil, fmt.Errorf("creating the upload spool: %w", err)
	}
	if err := s.ensureBucket(ctx, cmpOr(cfg.Region, "us-east-1")); err != nil {
		return nil, err
	}
	return s, nil
}

// ensureBucket creates the bucket unless it is there; another server
// creating it at the same moment is no failure.
func (s *S3) ensureBucket(ctx context.Context, region string) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("checking bucket %s: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	if err := s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region}); err != nil {
		if ok, err2 := s.c.BucketExists(ctx, s.bucket); err2 == nil && ok {
			return nil
		}
		return fmt.Errorf("creating bucket %s: %w", s.bucket, err)
	}
	return nil
}

// String implements Backend.
func (s *S3) String() string { return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/") }

// key is the object name of the content with this SHA-256.
func (s *S3) key(sum string) string { return s.prefix + "objects/" + sum[:2] + "/" + sum }

// Spool implements Backend.
func (s *S3) Spool() (*os.File, error) { return os.CreateTemp(s.spool, "leasehold-put-*") }

// Put implements Backend: one PUT of the spool, its length known.
func (s *S3) Put(ctx context.Context, sum string, spool *os.File, size int64) error {
	_, err := s.c.PutObject(ctx, s.bucket, s.key(sum), io.NewSectionReader(spool, 0, size), size,
		minio.PutObjectOptions{ContentType: "application/octet-stream", UserMetadata: map[string]string{checksumMeta: sum}})
	if err != nil {
		return fmt.Errorf("putting %s: %w", sum, err)
	}
	return nil
}

// Stat implements Backend.
func (s *S3) Stat(ctx context.Context, sum string) (ObjectInfo, error) {
	oi, err := s.c.StatObject(ctx, s.bucket, s.key(sum), minio.StatObjectOptions{})
	if err != nil {
		return ObjectInfo{}, notExist(err)
	}
	return ObjectInfo{SHA256: sum, Size: oi.Size, ModTime: oi.LastModified, Checksum: oi.UserMetadata[checksumMeta]}, nil
}

// checksumMeta is the user metadata (x-amz-meta-sha256) that records an
// object's SHA-256 at its PUT, for a resumed migration to compare.
const checksumMeta = "Sha256"

// Open implements Backend: the object's size is asked for at once (so
// that a missing object is fs.ErrNotExist here, not halfway through an
// answer); reads are ranged GETs from wherever Seek put the offset.
func (s *S3) Open(ctx context.Context, sum string) (io.ReadSeekCloser, error) {
	o, err := s.c.GetObject(ctx, s.bucket, s.key(sum), minio.GetObjectOptions{})
	if err != nil {
		return nil, notExist(err)
	}
	if _, err := o.Stat(); err != nil {
		_ = o.Close()
		return nil, notExist(err)
	}
	return o, nil
}

// Delete implements Backend (S3 answers a missing key's DELETE with 204).
func (s *S3) Delete(ctx context.Context, sum string) error {
	return s.c.RemoveObject(ctx, s.bucket, s.key(sum), minio.RemoveObjectOptions{})
}

// Walk implements Backend by listing the objects/ prefix.
func (s *S3) Walk(ctx context.Context, fn func(ObjectInfo) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the listing when fn stops it
	for oi := range s.c.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + "objects/", Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("listing %s: %w", s, oi.Err)
		}
		sum := path.Base(oi.Key)
		if !validSum(sum) || oi.Key != s.key(sum) {
			continue
		}
		if err := fn(ObjectInfo{SHA256: sum, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// CheckWritable implements Backend: a small object put under tmp/ and
// deleted.
func (s *S3) CheckWritable(ctx context.Context) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	key := s.prefix + "tmp/.ready-" + hex.EncodeToString(r[:])
	if _, err := s.c.PutObject(ctx, s.bucket, key, strings.NewReader("ok"), 2, minio.PutObjectOptions{}); err != nil {
		return err
	}
	return s.c.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{})
}

// notExist makes S3's answer for a missing key match fs.ErrNotExist.
func notExist(err error) error {
	r := minio.ToErrorResponse(err)
	if r.Code == minio.NoSuchKey || r.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	}
	return err
}
