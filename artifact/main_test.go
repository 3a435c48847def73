package artifact_test

import (
	"testing"

	"github.com/leasehold/leasehold/internal/s3test"
)

func TestMain(m *testing.M) { s3test.Main(m) }

// sharedS3 is the package's SeaweedFS; every S3 fixture has its own bucket.
func sharedS3(t *testing.T) *s3test.Server { return s3test.Shared(t) }
