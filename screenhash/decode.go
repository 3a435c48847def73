package screenhash

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"

	// The artifact store accepts screenshots as PNG, JPEG and WebP;
	// Decode reads all three.
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

var (
	// ErrTooLarge is returned, wrapped, by Decode for an image with more
	// pixels than its caller allows.
	ErrTooLarge = errors.New("too many pixels")

	// ErrTooSmall is returned, wrapped, by Decode for an image too small
	// to hash (see Of).
	ErrTooSmall = errors.New("too small to hash")
)

// decodeSlots bounds how many Decode calls decode at once in the process.
// Decoding a screenshot allocates its full pixel array (10 MB for a
// 1080×2400 screen, 18 MB for 1440×3200) and the decoder's buffers
// besides, so a burst of failures arriving together must not decode all
// their screenshots at once. Two let one decode go on while another waits
// for its reader, and hold the memory to about two screenshots' worth.
var decodeSlots = make(chan struct{}, 2)

// Decode reads a PNG, JPEG or WebP screenshot from r and returns its hash
// (see Of).
//
// It reads the image's header first, and refuses an image with more than
// maxPixels pixels (ErrTooLarge) before decoding it, so that a huge image
// never allocates its pixels. It refuses an image too small to hash
// (ErrTooSmall) rather than return the 0 that Of gives it. Every error
// starts "decoding screenshot: ".
//
// At most two Decode calls decode at once in the process; others wait.
// A call holds its turn while it reads the rest of r, so r should be a
// file or a buffer, not a slow network stream.
func Decode(r io.Reader, maxPixels int) (uint64, error) {
	// DecodeConfig consumes the start of r. Keep a copy of what it read
	// so the full decode can read the stream again from the start.
	var head bytes.Buffer
	cfg, _, err := image.DecodeConfig(io.TeeReader(r, &head))
	if err != nil {
		return 0, fmt.Errorf("decoding screenshot: %w", err)
	}
	// A side is at most 31 bits in PNG, 24 in WebP and 16 in JPEG, so the
	// product fits in an int64.
	if pixels := int64(cfg.Width) * int64(cfg.Height); pixels > int64(maxPixels) {
		return 0, fmt.Errorf("decoding screenshot: %d×%d is %d pixels, over the limit of %d: %w",
			cfg.Width, cfg.Height, pixels, maxPixels, ErrTooLarge)
	}
	if _, ok := hashArea(image.Rect(0, 0, cfg.Width, cfg.Height)); !ok {
		return 0, fmt.Errorf("decoding screenshot: %d×%d: %w", cfg.Width, cfg.Height, ErrTooSmall)
	}

	decodeSlots <- struct{}{}
	defer func() { <-decodeSlots }()

	img, _, err := image.Decode(io.MultiReader(&head, r))
	if err != nil {
		return 0, fmt.Errorf("decoding screenshot: %w", err)
	}
	return Of(img), nil
}
