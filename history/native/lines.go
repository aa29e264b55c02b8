package native

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes is the longest line a reader accepts (bytes, newline
// excluded). Real Claude lines reach ~9 MB (base64 images and tool output
// stored twice); a longer line is skipped and counted, never buffered whole.
const MaxLineBytes = 32 << 20

// errLineTooLong marks a line that was longer than the reader's limit. Its
// bytes were discarded.
var errLineTooLong = errors.New("line too long")

// lineReader splits a stream on raw '\n' with no per-line length limit
// below max. It tracks the byte offset just after the last complete line,
// which is where a tail resumes.
type lineReader struct {
	br     *bufio.Reader
	long   []byte
	max    int
	off    int64 // bytes consumed, including the newline of the last complete line
	lineNo int   // 1-based number of the last line returned
	// lastComplete is false when the last line returned had no newline.
	lastComplete bool
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = MaxLineBytes
	}
	return &lineReader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// next returns the next line without its '\n' (and without a trailing
// '\r'). complete is false for a final line that has no newline yet. The
// slice is valid until the next call. At the end it returns io.EOF; a line
// over the limit returns errLineTooLong (and the reader moves past it).
func (r *lineReader) next() (line []byte, complete bool, err error) {
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], b...)
		over := false
		for err == bufio.ErrBufferFull {
			b, err = r.br.ReadSlice('\n')
			if !over && len(r.long)+len(b) > r.max+1 {
				over = true
				r.off += int64(len(r.long))
				r.long = r.long[:0]
			}
			if over {
				r.off += int64(len(b))
				continue
			}
			r.long = append(r.long, b...)
		}
		if over {
			r.lineNo++
			r.lastComplete = err == nil
			if err != nil && err != io.EOF {
				return nil, false, fmt.Errorf("read line %d: %w", r.lineNo, err)
			}
			return nil, err == nil, errLineTooLong
		}
		b = r.long
	}
	if err != nil && err != io.EOF {
		return nil, false, fmt.Errorf("read line %d: %w", r.lineNo+1, err)
	}
	if len(b) == 0 && err == io.EOF {
		return nil, false, io.EOF
	}
	r.lineNo++
	complete = err == nil
	r.lastComplete = complete
	if complete {
		r.off += int64(len(b))
		b = b[:len(b)-1]
		if len(b) > r.max {
			return nil, true, errLineTooLong
		}
	}
	return bytes.TrimRight(b, "\r"), complete, nil
}

// lineFunc handles one line. n is the 1-based line number.
type lineFunc func(n int, line []byte)

// eachLine reads every line of r, calling fn for each non-blank one,
// including a final line without a newline (a finished file may lack it).
// Over-long lines are counted in d and skipped.
func eachLine(r io.Reader, d *Diagnostics, fn lineFunc) error {
	lr := newLineReader(r, MaxLineBytes)
	for {
		line, _, err := lr.next()
		if err == io.EOF {
			return nil
		}
		if err == errLineTooLong {
			d.SkippedLines++
			d.problemf("line %d: longer than %d bytes, skipped", lr.lineNo, MaxLineBytes)
			continue
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		fn(lr.lineNo, line)
	}
}

// gluedRecords splits a line that holds several complete JSON objects one
// after the other ({...}{...}: two writers, or a write that lost its
// newline) into those objects. It returns nil unless the whole line is two
// or more objects: a line with a broken piece stays one skipped line, since
// an object found inside a cut-short record is not a record.
func gluedRecords(line []byte) [][]byte {
	var parts [][]byte
	i := skipSpace(line, 0)
	for i < len(line) {
		if line[i] != '{' {
			return nil
		}
		end, ok := skipValue(line, i)
		// strict check: the skim is looser than a full decode on literals
		// and escapes, and the two must split alike
		if !ok || !json.Valid(line[i:end]) {
			return nil
		}
		parts = append(parts, line[i:end])
		i = skipSpace(line, end)
	}
	if len(parts) < 2 {
		return nil
	}
	return parts
}
