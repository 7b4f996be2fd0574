package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestReplayTornTailAtEveryOffset cuts the log at every byte offset inside
// its last three records: replay must keep every whole record, cut off the
// partial one, report how many bytes it cut and leave the file at the valid
// length. The same holds when the file system padded the file with zeros.
func TestReplayTornTailAtEveryOffset(t *testing.T) {
	recs := payloads(4, 20, 90)
	data, offsets := encodeLog(recs)
	dir := t.TempDir()
	for _, pad := range []int{0, 4096} {
		for cut := offsets[len(recs)-3]; cut <= int64(len(data)); cut++ {
			name := fmt.Sprintf("cut-%d-pad-%d", cut, pad)
			file := append(bytes.Clone(data[:cut]), make([]byte, pad)...)
			path := writeFile(t, dir, name, file)

			// whole counts the records that end at or before cut.
			whole, validEnd := 0, int64(logHeaderSize)
			for i := range recs {
				end := int64(len(data))
				if i+1 < len(recs) {
					end = offsets[i+1]
				}
				if end <= cut {
					whole, validEnd = i+1, end
				}
			}

			got, res := replayAll(t, path)
			sameRecords(t, got, recs[:whole])
			wantTorn := int64(len(file)) - validEnd
			if res.ValidBytes != validEnd || res.TornBytes != wantTorn || res.Records != uint64(whole) {
				t.Fatalf("%s: result %+v, want valid %d torn %d records %d", name, res, validEnd, wantTorn, whole)
			}
			if (wantTorn > 0) != (res.TornReason != "") {
				t.Fatalf("%s: torn reason %q", name, res.TornReason)
			}
			if size := fileSize(t, path); size != validEnd {
				t.Fatalf("%s: file is %d bytes after replay, want %d", name, size, validEnd)
			}
			os.Remove(path)
		}
	}
}

// TestReplayBadLastRecordIsTorn damages each byte of the last record: with
// nothing valid after it, that is a torn write, not corruption.
func TestReplayBadLastRecordIsTorn(t *testing.T) {
	recs := payloads(5, 10, 60)
	data, offsets := encodeLog(recs)
	last := offsets[len(offsets)-1]
	dir := t.TempDir()
	for i := last; i < int64(len(data)); i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		path := writeFile(t, dir, fmt.Sprintf("flip-%d", i), bad)
		got, res := replayAll(t, path)
		sameRecords(t, got, recs[:len(recs)-1])
		if res.TornBytes != int64(len(data))-last || fileSize(t, path) != last {
			t.Fatalf("flip at %d: %+v", i, res)
		}
	}
}

// TestReplayCorruptMiddle damages each byte of a middle record: replay stops
// there with a *CorruptError at that record's offset, after delivering the
// records before it, and leaves the file alone.
func TestReplayCorruptMiddle(t *testing.T) {
	recs := payloads(6, 12, 60)
	data, offsets := encodeLog(recs)
	const k = 5
	end := offsets[k+1]
	dir := t.TempDir()
	for i := offsets[k]; i < end; i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0xff
		path := writeFile(t, dir, fmt.Sprintf("flip-%d", i), bad)
		var n int
		res, err := ReplayLog(path, func(p []byte) error {
			if !bytes.Equal(p, recs[n]) {
				t.Fatalf("record %d differs", n)
			}
			n++
			return nil
		})
		ce := asCorrupt(t, err)
		if ce.Offset != offsets[k] || ce.File != path || n != k || res.Records != k || res.ValidBytes != offsets[k] {
			t.Fatalf("flip at %d: %+v, %d records, result %+v; want offset %d", i, ce, n, res, offsets[k])
		}
		msg := err.Error()
		for _, want := range []string{path, fmt.Sprintf("offset %d", offsets[k]), "--check-log " + path + " --fix"} {
			if !strings.Contains(msg, want) {
				t.Fatalf("error %q does not mention %q", msg, want)
			}
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, bad) {
			t.Fatal("replay changed a corrupt file")
		}
	}
}

// TestReplayHole models pages lost out of order: a zeroed stretch in the
// middle with valid records after it is corruption, not a torn tail.
func TestReplayHole(t *testing.T) {
	recs := payloads(7, 50, 200)
	data, offsets := encodeLog(recs)
	bad := bytes.Clone(data)
	clear(bad[offsets[10]+3 : offsets[20]])
	path := writeFile(t, t.TempDir(), "hole", bad)
	_, err := ReplayLog(path, nil)
	if ce := asCorrupt(t, err); ce.Offset != offsets[10] {
		t.Fatalf("offset %d, want %d", ce.Offset, offsets[10])
	}
}

func TestReplayBadHeader(t *testing.T) {
	data, _ := encodeLog(payloads(8, 3, 10))
	dir := t.TempDir()
	var cases [][]byte
	for n := range logHeaderSize {
		cases = append(cases, data[:n]) // short, including empty
	}
	for i := range logHeaderSize {
		bad := bytes.Clone(data)
		bad[i] ^= 1
		cases = append(cases, bad)
	}
	for i, c := range cases {
		path := writeFile(t, dir, fmt.Sprintf("h%d", i), c)
		_, err := ReplayLog(path, func([]byte) error { t.Fatal("record delivered"); return nil })
		if ce := asCorrupt(t, err); ce.Offset != 0 {
			t.Fatalf("case %d: offset %d", i, ce.Offset)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, c) {
			t.Fatal("replay changed a file with a bad header")
		}
	}
}

func TestReplayStopsOnCallbackError(t *testing.T) {
	data, _ := encodeLog(payloads(9, 10, 10))
	data = append(data, 1, 2, 3) // torn tail, which must not be cut if fn fails
	path := writeFile(t, t.TempDir(), "a", data)
	stop := errors.New("stop")
	n := 0
	res, err := ReplayLog(path, func([]byte) error {
		if n++; n == 4 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || res.Records != 3 {
		t.Fatalf("got %v, %+v", err, res)
	}
	if fileSize(t, path) != int64(len(data)) {
		t.Fatal("file truncated although replay failed")
	}
}

func TestCheckLog(t *testing.T) {
	recs := payloads(10, 30, 100)
	data, offsets := encodeLog(recs)
	dir := t.TempDir()

	t.Run("ok", func(t *testing.T) {
		path := writeFile(t, dir, "ok", data)
		r, err := CheckLog(path, true)
		if err != nil || !r.OK() || r.Records != 30 || r.ValidBytes != int64(len(data)) || r.Truncated {
			t.Fatalf("%+v, %v", r, err)
		}
		if !strings.Contains(r.String(), "OK") {
			t.Errorf("report %q", r)
		}
	})

	t.Run("torn", func(t *testing.T) {
		path := writeFile(t, dir, "torn", data[:len(data)-5])
		r, err := CheckLog(path, false)
		if err != nil || r.OK() || !r.Torn || r.BadOffset != offsets[29] || r.Records != 29 {
			t.Fatalf("%+v, %v", r, err)
		}
		if fileSize(t, path) != int64(len(data)-5) {
			t.Fatal("check without fix changed the file")
		}
		t.Log(r)
	})

	t.Run("corrupt", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[offsets[12]+10] ^= 1
		path := writeFile(t, dir, "corrupt", bad)
		r, err := CheckLog(path, false)
		if err != nil || r.Torn || r.BadOffset != offsets[12] || r.Records != 12 || r.Reason != "checksum mismatch" {
			t.Fatalf("%+v, %v", r, err)
		}
		if !strings.Contains(r.String(), fmt.Sprint(offsets[12])) {
			t.Errorf("report does not name the offset: %q", r)
		}
		if fileSize(t, path) != int64(len(bad)) {
			t.Fatal("check without fix changed the file")
		}
		// Start-up refuses it ...
		if _, err := ReplayLog(path, nil); err == nil {
			t.Fatal("ReplayLog accepted a corrupt log")
		}
		// ... until the operator runs the fix, which keeps every intact
		// record and skips the damaged one alone.
		r, err = CheckLog(path, true)
		if err != nil || !r.Salvaged || r.Kept != 29 || len(r.Skipped) != 1 ||
			r.Skipped[0].Offset != offsets[12] || r.Skipped[0].Bytes != offsets[13]-offsets[12] {
			t.Fatalf("%+v, %v", r, err)
		}
		t.Log(r)
		got, res := replayAll(t, path)
		sameRecords(t, got, append(slices.Clone(recs[:12]), recs[13:]...))
		if res.TornBytes != 0 {
			t.Fatalf("%+v", res)
		}
		if r, err := CheckLog(path, false); err != nil || !r.OK() {
			t.Fatalf("after fix: %+v, %v", r, err)
		}
	})

	t.Run("bad header", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[0] = 'X'
		path := writeFile(t, dir, "header", bad)
		r, err := CheckLog(path, true)
		if err != nil || r.BadOffset != 0 || !r.Salvaged || r.Kept != 30 {
			t.Fatalf("%+v, %v", r, err)
		}
		got, _ := replayAll(t, path)
		sameRecords(t, got, recs)
	})

	t.Run("not a log", func(t *testing.T) {
		junk := bytes.Repeat([]byte("not a log at all "), 100)
		path := writeFile(t, dir, "junk", junk)
		if r, err := CheckLog(path, true); err == nil || r.Salvaged {
			t.Fatalf("%+v, %v", r, err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, junk) {
			t.Fatal("fix changed a file that holds no record")
		}
	})

	t.Run("two damaged stretches", func(t *testing.T) {
		bad := bytes.Clone(data)
		bad[offsets[3]+9] ^= 0xff
		for i := offsets[20]; i < offsets[22]+3; i++ {
			bad[i] = 0
		}
		path := writeFile(t, dir, "two", bad)
		r, err := CheckLog(path, true)
		if err != nil || !r.Salvaged || r.Kept != 26 || len(r.Skipped) != 2 {
			t.Fatalf("%+v, %v", r, err)
		}
		t.Log(r)
		got, _ := replayAll(t, path)
		want := append(append(slices.Clone(recs[:3]), recs[4:20]...), recs[23:]...)
		sameRecords(t, got, want)
	})

	t.Run("missing", func(t *testing.T) {
		if _, err := CheckLog(dir+"/nope", false); !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	})
}

// TestValidRecordAfterBudget: a crafted tail that would make the resync
// scan checksum gigabytes is called corruption (the safe answer) instead.
func TestValidRecordAfterBudget(t *testing.T) {
	// Every offset claims a 1 MiB record, none valid.
	tail := make([]byte, 4<<20)
	for i := range tail {
		tail[i] = []byte{0x00, 0x00, 0x10, 0x00}[i%4]
	}
	found, err := validRecordAfter(bytes.NewReader(tail), 0, int64(len(tail)))
	if err != nil || !found {
		t.Fatalf("found %v, err %v: want the budget to give up and say found", found, err)
	}
	found, err = validRecordAfter(bytes.NewReader(make([]byte, 8<<20)), 0, 8<<20)
	if err != nil || found {
		t.Fatalf("zeros: found %v, err %v", found, err)
	}
}
