package cli

import (
	"context"
	"fmt"
	"os"

	"github.com/leasehold/leasehold/artifact"
	"github.com/leasehold/leasehold/queue"
)

// ArtifactsUsage describes --artifacts for every command that takes it.
const ArtifactsUsage = "artifact storage: a directory, or s3://bucket/prefix (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, LEASEHOLD_S3_PATH_STYLE)"

// OpenArtifacts opens the artifact store at location (a directory or an
// s3:// URL configured by the environment).
func OpenArtifacts(ctx context.Context, location string, q *queue.Client) (*artifact.Store, error) {
	b, err := artifact.OpenBackend(ctx, location, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("opening artifact storage %s: %w", location, err)
	}
	return artifact.NewStore(b, q, artifact.Limits{}), nil
}
