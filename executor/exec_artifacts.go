package executor

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// execArtifactPoll is how often LEASEHOLD_ARTIFACT_DIR is looked at while the
// command runs.
const execArtifactPoll = 200 * time.Millisecond

// execArtifactDir uploads what the command writes to its artifact directory:
// images while it runs, images and text files it left when it exits.
type execArtifactDir struct {
	dir string
	up  *execUploader
	log *slog.Logger
	// seen is what the last scan found: a file is uploaded once two scans
	// in a row agree on it, so a half-written file is not sent.
	seen map[string]execFileStamp
	// sent is the size each name had when it was uploaded: a file
	// rewritten with a different size goes again.
	sent map[string]int64
}

type execFileStamp struct {
	size    int64
	modTime time.Time
}

func newExecArtifactDir(dir string, up *execUploader, log *slog.Logger) *execArtifactDir {
	return &execArtifactDir{dir: dir, up: up, log: log, seen: map[string]execFileStamp{}, sent: map[string]int64{}}
}

// poll scans the directory every execArtifactPoll until stop is closed
// or ctx ends. Stopping lets an upload in flight finish: a file marked
// sent must have been sent.
func (a *execArtifactDir) poll(ctx context.Context, stop <-chan struct{}) {
	tick := time.NewTicker(execArtifactPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-tick.C:
			a.scan(ctx, false)
		}
	}
}

// scan uploads the images that are ready; final, once the command has
// exited, uploads every image not sent yet, stable or not, and the text
// files.
func (a *execArtifactDir) scan(ctx context.Context, final bool) {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		a.log.Warn("reading artifact dir", "err", err)
		return
	}
	now := make(map[string]execFileStamp, len(entries))
	var ready []string
	for _, e := range entries {
		name := e.Name()
		// Regular files only: no subdirectories, and no symlinks pointing
		// the upload somewhere else. Dotfiles are editors' and tools'
		// scratch files.
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") {
			continue
		}
		image, text := execArtifactType(name)
		if !image && !(text && final) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		stamp := execFileStamp{size: info.Size(), modTime: info.ModTime()}
		now[name] = stamp
		if stamp.size == 0 {
			continue
		}
		if size, ok := a.sent[name]; ok && size == stamp.size {
			continue
		}
		if final || a.seen[name] == stamp {
			ready = append(ready, name)
		}
	}
	a.seen = now
	// Oldest first: screenshots reach the timeline in the order taken.
	slices.SortFunc(ready, func(x, y string) int {
		return cmp.Or(now[x].modTime.Compare(now[y].modTime), strings.Compare(x, y))
	})
	for _, name := range ready {
		a.sent[name] = now[name].size
		a.upload(ctx, name)
	}
}

func (a *execArtifactDir) upload(ctx context.Context, name string) {
	f, err := os.OpenFile(filepath.Join(a.dir, name), os.O_RDONLY|execNoFollow, 0)
	if err != nil {
		a.log.Warn("opening artifact", "name", name, "err", err)
		return
	}
	defer f.Close()
	a.up.upload(ctx, name, f)
}

// execArtifactType says whether name is a screenshot or a text artifact by its
// extension; the reporter checks the content.
func execArtifactType(name string) (image, text bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".webp":
		return true, false
	case ".txt", ".log", ".xml":
		return false, true
	}
	return false, false
}
