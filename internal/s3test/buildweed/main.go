// Command buildweed builds the SeaweedFS binary the S3 tests run into the
// user's cache directory, unless it is there already, and prints its path.
// .ci/run runs it before the tests so that no test waits for the build.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/leasehold/leasehold/internal/s3test"
)

func main() {
	bin, err := s3test.Binary(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildweed:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
