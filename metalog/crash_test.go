package metalog

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestTornGroupAnySectorsAnySize: the last group's bytes persisted as any
// subset of its 512-byte sectors, with the file size anywhere from the
// group's start to its end: open must succeed, keep every earlier group
// and either all or none of the last one.
func TestTornGroupAnySectorsAnySize(t *testing.T) {
	dir := t.TempDir()
	g1, g2 := longBodies("a", 7), longBodies("b", 3)
	g3 := longBodies("c", 20) // ~2.2 KB: 5 sectors
	path, _ := writeGroups(t, dir, g1, g2)
	before, _ := os.ReadFile(path)
	writeGroups2 := func() []byte {
		d2 := t.TempDir()
		p2, _ := writeGroups(t, d2, g1, g2, g3)
		b, _ := os.ReadFile(p2)
		return b
	}
	full := writeGroups2()
	start, end := int64(len(before)), int64(len(full))
	const sector = 512
	secs := int((end-1)/sector - start/sector + 1)
	first := start / sector
	cases := 0
	for mask := 0; mask < 1<<secs; mask++ {
		for size := start; size <= end; size++ {
			if size%sector != 0 && size != end && (size-start)%53 != 0 {
				continue // sample
			}
			img := slices.Clone(full[:size])
			for i := start; i < size; i++ {
				if mask&(1<<(i/sector-first)) == 0 {
					img[i] = 0
				}
			}
			copy(img, before) // earlier groups are durable
			d := filepath.Join(t.TempDir(), "s")
			os.MkdirAll(d, 0o755)
			os.WriteFile(filepath.Join(d, filepath.Base(path)), img, 0o644)
			l, err := OpenFileLog(d, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := replayAll(t, l, 0)
			l.Close()
			cases++
			if err != nil {
				t.Fatalf("mask %b size %d: %v", mask, size, err)
			}
			a, b := slices.Concat(g1, g2), slices.Concat(g1, g2, g3)
			if !reflect.DeepEqual(got, a) && !reflect.DeepEqual(got, b) {
				t.Fatalf("mask %b size %d: %d records", mask, size, len(got))
			}
		}
	}
	t.Logf("%d crash images", cases)
}
