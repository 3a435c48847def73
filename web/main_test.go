package web_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/s3test"
)

// TestMain stops the SeaweedFS that the artifact tests on S3 share.
func TestMain(m *testing.M) { s3test.Main(m) }
