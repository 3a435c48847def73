package artifact

import (
	"context"
	"strings"
	"testing"
)

func TestParseS3URL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw, bucket, prefix string
		ok, err             bool
	}{
		{raw: "/var/lib/leasehold/artifacts"},
		{raw: "s3:/bucket", ok: false},
		{raw: "s3://bucket", bucket: "bucket", ok: true},
		{raw: "s3://bucket/", bucket: "bucket", ok: true},
		{raw: "s3://bucket/prod/leasehold/", bucket: "bucket", prefix: "prod/leasehold", ok: true},
		{raw: "s3://", ok: true, err: true},
		{raw: "s3:///prefix", ok: true, err: true},
		{raw: "s3://key:secret@bucket/p", ok: true, err: true},
		{raw: "s3://bucket/p?region=eu", ok: true, err: true},
		{raw: "s3://bucket/p#x", ok: true, err: true},
		{raw: "s3://bu cket/p", ok: true, err: true},
	} {
		bucket, prefix, ok, err := ParseS3URL(c.raw)
		if bucket != c.bucket || prefix != c.prefix || ok != c.ok || (err != nil) != c.err {
			t.Errorf("ParseS3URL(%q) = %q, %q, %v, %v; want %q, %q, %v, error %v", c.raw, bucket, prefix, ok, err, c.bucket, c.prefix, c.ok, c.err)
		}
		if err != nil && !strings.Contains(err.Error(), "want s3://bucket") {
			t.Errorf("ParseS3URL(%q): error %q does not say what is wanted", c.raw, err)
		}
	}
}

func TestS3ConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cfg, err := S3ConfigFromEnv("s3://shots/prod", env(map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:8333", "AWS_DEFAULT_REGION": "eu-central-1",
		"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "session",
		"LEASEHOLD_S3_PATH_STYLE": "true",
	}))
	want := S3Config{Bucket: "shots", Prefix: "prod", Endpoint: "http://127.0.0.1:8333", Region: "eu-central-1",
		AccessKey: "id", SecretKey: "secret", SessionToken: "session", PathStyle: true}
	if err != nil || cfg != want {
		t.Errorf("S3ConfigFromEnv = %+v, %v; want %+v", cfg, err, want)
	}
	// AWS_REGION wins over AWS_DEFAULT_REGION, as in AWS's own tools.
	if cfg, _ := S3ConfigFromEnv("s3://b", env(map[string]string{"AWS_REGION": "us-west-2", "AWS_DEFAULT_REGION": "eu-central-1"})); cfg.Region != "us-west-2" || cfg.PathStyle {
		t.Errorf("region %q, path style %v; want us-west-2, false", cfg.Region, cfg.PathStyle)
	}
	for _, c := range []struct{ raw, pathStyle, want string }{
		{"/srv/artifacts", "", "is not an s3:// URL"},
		{"s3://", "", "want s3://bucket"},
		{"s3://b", "yes", `LEASEHOLD_S3_PATH_STYLE="yes": want true or false`},
	} {
		_, err := S3ConfigFromEnv(c.raw, env(map[string]string{"LEASEHOLD_S3_PATH_STYLE": c.pathStyle}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("S3ConfigFromEnv(%q, path style %q): %v, want an error saying %q", c.raw, c.pathStyle, err, c.want)
		}
	}
}

// An endpoint that is not a bare http(s) address is refused before any
// connection is tried.
func TestNewS3RefusesABadEndpoint(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"127.0.0.1:8333", "ftp://host", "http://", "http://host/bucket", "http://host:port:x", "::"} {
		_, err := NewS3(context.Background(), S3Config{Bucket: "b", Endpoint: endpoint, SpoolDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "AWS_ENDPOINT_URL") {
			t.Errorf("NewS3(endpoint %q): %v, want an error naming AWS_ENDPOINT_URL", endpoint, err)
		}
	}
}
