package screenhash

import "image"

// OfWholeImage hashes all of img, status bar included, so that a test can
// show what the hash would be without the crop.
func OfWholeImage(img image.Image) uint64 {
	if _, ok := hashArea(img.Bounds()); !ok {
		return 0
	}
	return hash(img, img.Bounds())
}

// DecodeSlots returns how many decode slots are taken now, and how many
// there are.
func DecodeSlots() (inUse, total int) {
	return len(decodeSlots), cap(decodeSlots)
}
