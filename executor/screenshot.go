package executor

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"strings"

	xdraw "golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The size of a simulated phone screen, in pixels.
const (
	ScreenWidth  = 360
	ScreenHeight = 720
)

// Screen is one step of a simulated investigation, as the phone would have
// shown it. The same Screen always renders to the same bytes.
type Screen struct {
	JobID   int64
	Attempt int32
	App     string
	Step    int
	Steps   int
	Hang    bool // the job never ends: the step count has no total
}

// Label is the line that identifies the screenshot: job, attempt and step.
func (s Screen) Label() string {
	label := fmt.Sprintf("job %d · attempt %d · step %s", s.JobID, s.Attempt, s.stepText())
	if s.Hang {
		label += " (hang)"
	}
	return label
}

func (s Screen) stepText() string {
	if s.Hang {
		return fmt.Sprint(s.Step)
	}
	return fmt.Sprintf("%d/%d", s.Step, s.Steps)
}

// PNG renders the screen as a PNG image.
func (s Screen) PNG() ([]byte, error) {
	var buf bytes.Buffer
	// BestSpeed keeps a screenshot within a few milliseconds; the flat
	// colours compress well enough anyway.
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, s.Image()); err != nil {
		return nil, fmt.Errorf("encoding screenshot: %w", err)
	}
	return buf.Bytes(), nil
}

// The mock content of a screen: a title per step, and row labels.
var (
	screenTitles = []string{"Home", "Search", "Settings", "Profile", "Notifications", "Details", "Cart", "Messages", "Help", "About"}
	rowLabels    = []string{"Account", "Privacy", "Storage", "Display", "Sounds", "Battery", "Backup", "Language", "Sync", "Camera", "Location", "Contacts", "Calendar", "Wi-Fi", "Bluetooth", "Updates"}
)

var (
	white       = color.RGBA{0xff, 0xff, 0xff, 0xff}
	background  = color.RGBA{0xf3, 0xf4, 0xf6, 0xff}
	ink         = color.RGBA{0x1f, 0x29, 0x37, 0xff}
	muted       = color.RGBA{0x6b, 0x72, 0x80, 0xff}
	line        = color.RGBA{0xd1, 0xd5, 0xdb, 0xff}
	placeholder = color.RGBA{0xe5, 0xe7, 0xeb, 0xff}
	black       = color.RGBA{0x11, 0x11, 0x11, 0xff}
)

// Image draws the screen: status bar, app bar, a card naming job, attempt
// and step, a list whose rows and highlighted row change with the step,
// buttons, and the navigation bar.
func (s Screen) Image() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, ScreenWidth, ScreenHeight))
	h := appHash(s.App)
	brand := hsl(float64(h%360), 0.55, 0.40)
	accent := hsl(float64((h+150)%360), 0.65, 0.45)
	fill(img, img.Bounds(), background)

	// Status bar: a clock and battery that move with the step, so that
	// even identical-looking screens differ.
	fill(img, image.Rect(0, 0, ScreenWidth, 24), shade(brand, 0.7))
	drawText(img, 12, 6, fmt.Sprintf("10:%02d", mod(s.Step*3+int(s.Attempt), 60)), 1, white)
	for i := range 4 {
		fill(img, image.Rect(286+i*6, 18-i*3-3, 290+i*6, 18), white)
	}
	fill(img, image.Rect(316, 7, 344, 18), white)
	fill(img, image.Rect(318, 9, 342, 16), shade(brand, 0.7))
	level := 24 * (90 - mod(s.Step*7, 60)) / 100
	fill(img, image.Rect(318, 9, 318+level, 16), white)
	fill(img, image.Rect(344, 10, 346, 15), white)

	// App bar in the app's own colour, derived from its name.
	fill(img, image.Rect(0, 24, ScreenWidth, 80), brand)
	drawTextFit(img, 16, 39, ScreenWidth-56, 2, s.App, white)
	for i := range 3 {
		fill(img, image.Rect(338, 38+i*8, 342, 42+i*8), white)
	}

	// The card a person looks for first: which job, attempt and step.
	card := image.Rect(12, 92, ScreenWidth-12, 204)
	fill(img, card, line)
	fill(img, card.Inset(1), white)
	drawTextFit(img, 24, 102, card.Dx()-24, 2, fmt.Sprintf("job %d", s.JobID), ink)
	drawTextFit(img, 24, 134, card.Dx()-24, 2, fmt.Sprintf("attempt %d · step %s", s.Attempt, s.stepText()), ink)
	bar := image.Rect(24, 176, ScreenWidth-24, 186)
	fill(img, bar, placeholder)
	done := bar.Dx()
	if s.Hang {
		done = bar.Dx() * mod(s.Step, 10) / 10
	} else if s.Steps > 0 {
		done = bar.Dx() * max(0, min(s.Step, s.Steps)) / s.Steps
	}
	fill(img, image.Rect(bar.Min.X, bar.Min.Y, bar.Min.X+done, bar.Max.Y), accent)

	// The screen the simulated agent is on, and the row it taps.
	title := screenTitles[mod(s.Step-1+int(h%7), len(screenTitles))]
	drawText(img, 16, 220, title, 2, ink)
	rows := 3 + mod(s.Step+int(h), 3)
	tapped := mod(s.Step*5+int(h), rows)
	for i := range rows {
		top := 256 + i*56
		row := image.Rect(12, top, ScreenWidth-12, top+52)
		bg := white
		if i == tapped {
			bg = tint(accent, 0.82)
		}
		fill(img, row, bg)
		avatar := hsl(float64(mod(int(h%360)+i*47+s.Step*29, 360)), 0.5, 0.6)
		disc(img, 40, top+26, 16, avatar)
		label := rowLabels[mod(s.Step*5+i*3+int(h), len(rowLabels))]
		drawText(img, 66, top+10, label, 1, ink)
		// Grey bars stand in for a row's secondary text.
		width := 60 + mod(s.Step*37+i*53+int(h), 180)
		fill(img, image.Rect(66, top+32, 66+width, top+38), placeholder)
		if i == tapped {
			// A touch ring where the agent tapped.
			cx := 250 + mod(s.Step*61, 70)
			ring(img, cx, top+26, 14, 3, accent)
		}
	}

	// Buttons: which ones depends on the step.
	btnTop := 256 + rows*56 + 8
	if s.Step%2 == 0 {
		button(img, image.Rect(12, btnTop, 174, btnTop+40), "Cancel", white, accent)
		button(img, image.Rect(186, btnTop, ScreenWidth-12, btnTop+40), "OK", accent, white)
	} else {
		button(img, image.Rect(12, btnTop, ScreenWidth-12, btnTop+40), "Continue", accent, white)
	}

	// Floating action button.
	disc(img, 316, 616, 24, accent)
	fill(img, image.Rect(306, 614, 326, 618), white)
	fill(img, image.Rect(314, 606, 318, 626), white)

	// The full label in small type, as a caption above the navigation bar.
	label, _ := fitText(s.Label(), ScreenWidth-8, 1)
	drawText(img, (ScreenWidth-textWidth(label))/2, 650, label, 1, muted)

	// Navigation bar: back, home, recents.
	fill(img, image.Rect(0, ScreenHeight-48, ScreenWidth, ScreenHeight), black)
	for i := range 9 {
		fill(img, image.Rect(80+i, ScreenHeight-24-(9-i), 82+i, ScreenHeight-24+(9-i)), white)
	}
	ring(img, ScreenWidth/2, ScreenHeight-24, 10, 2, white)
	fill(img, image.Rect(270, ScreenHeight-33, 288, ScreenHeight-15), white)
	fill(img, image.Rect(272, ScreenHeight-31, 286, ScreenHeight-17), black)
	return img
}

// mod is a modulo that stays in [0, n) for negative a too, so that no
// odd Screen can index out of range.
func mod(a, n int) int {
	return ((a % n) + n) % n
}

func appHash(app string) uint32 {
	f := fnv.New32a()
	f.Write([]byte(app))
	return f.Sum32()
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func button(img *image.RGBA, r image.Rectangle, text string, bg, fg color.RGBA) {
	fill(img, r, fg)
	fill(img, r.Inset(2), bg)
	x := r.Min.X + (r.Dx()-2*textWidth(text))/2
	drawText(img, x, r.Min.Y+(r.Dy()-26)/2, text, 2, fg)
}

// disc fills a circle of radius rad centred on (cx, cy).
func disc(img *image.RGBA, cx, cy, rad int, c color.RGBA) {
	ring(img, cx, cy, rad, rad+1, c)
}

// ring draws a circle outline of the given thickness inside radius rad.
func ring(img *image.RGBA, cx, cy, rad, thickness int, c color.RGBA) {
	inner := (rad - thickness) * (rad - thickness)
	for y := -rad; y <= rad; y++ {
		for x := -rad; x <= rad; x++ {
			d := x*x + y*y
			if d <= rad*rad && (thickness > rad || d >= inner) {
				img.SetRGBA(cx+x, cy+y, c)
			}
		}
	}
}

// textWidth is the width of s at scale 1: basicfont is monospaced.
func textWidth(s string) int {
	return basicfont.Face7x13.Advance * len([]rune(s))
}

// fitText picks the scale at which s fits in maxWidth: scale, or 1 when
// it would not fit, cut short with "..." when it fits at no scale.
func fitText(s string, maxWidth, scale int) (string, int) {
	if textWidth(s)*scale > maxWidth {
		scale = 1
	}
	if textWidth(s) > maxWidth {
		r := []rune(s)
		keep := max(0, maxWidth/basicfont.Face7x13.Advance-3)
		s = string(r[:min(keep, len(r))]) + "..."
	}
	return s, scale
}

// drawTextFit draws s at (x, y) as fitText makes it fit in maxWidth.
func drawTextFit(img *image.RGBA, x, y, maxWidth, scale int, s string, c color.RGBA) {
	s, scale = fitText(s, maxWidth, scale)
	drawText(img, x, y, s, scale, c)
}

// drawText draws s with its top left corner at (x, y), each font pixel
// scale×scale pixels big. basicfont has ASCII only: the middle dot of the
// label is drawn by hand.
func drawText(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	face := basicfont.Face7x13
	w, h := textWidth(s), face.Height
	if w == 0 {
		return
	}
	mask := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: mask, Src: image.Opaque, Face: face}
	for i, part := range strings.Split(s, "·") {
		if i > 0 {
			// The dot sits at mid x-height, two pixels square.
			px := d.Dot.X.Round() + 2
			draw.Draw(mask, image.Rect(px, 6, px+2, 8), image.Opaque, image.Point{}, draw.Src)
			d.Dot.X += fixed.I(face.Advance)
		}
		d.Dot.Y = fixed.I(face.Ascent)
		d.DrawString(part)
	}
	if scale > 1 {
		big := image.NewAlpha(image.Rect(0, 0, w*scale, h*scale))
		xdraw.NearestNeighbor.Scale(big, big.Bounds(), mask, mask.Bounds(), draw.Src, nil)
		mask = big
	}
	r := mask.Bounds().Add(image.Pt(x, y))
	draw.DrawMask(img, r, image.NewUniform(c), image.Point{}, mask, image.Point{}, draw.Over)
}

// hsl converts a hue (degrees), saturation and lightness to a colour.
func hsl(h, s, l float64) color.RGBA {
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h/60, 2)-1))
	m := l - c/2
	var r, g, b float64
	switch {
	case h < 60:
		r, g, b = c, x, 0
	case h < 120:
		r, g, b = x, c, 0
	case h < 180:
		r, g, b = 0, c, x
	case h < 240:
		r, g, b = 0, x, c
	case h < 300:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	to8 := func(v float64) uint8 { return uint8(math.Round((v + m) * 255)) }
	return color.RGBA{to8(r), to8(g), to8(b), 0xff}
}

// shade darkens c by factor f in [0, 1].
func shade(c color.RGBA, f float64) color.RGBA {
	return color.RGBA{uint8(float64(c.R) * f), uint8(float64(c.G) * f), uint8(float64(c.B) * f), 0xff}
}

// tint mixes c with white, f being white's share.
func tint(c color.RGBA, f float64) color.RGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v)*(1-f) + 255*f) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 0xff}
}
