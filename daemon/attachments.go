package daemon

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// Limits of ochat/chat/send attachments (docs/protocol.md, "Attachments").
// Every size is in bytes of the file as stored.
const (
	// MaxImageBytes caps one image attachment: Anthropic's Messages API
	// refuses a larger image, and its base64 (4/3 of it) must fit the one
	// stdin line an agent reads a prompt from, next to the prompt text.
	MaxImageBytes = 5 << 20
	// MaxFileBytes caps one file attachment (the cap of fs/read_text_file).
	MaxFileBytes = 10 << 20
	// MaxEmbedBytes is the largest file attachment sent as an embedded text
	// resource; a larger one is sent as a resource link the agent reads
	// itself.
	MaxEmbedBytes = 1 << 20
	// MaxAttachmentBytes caps the attachments of one message together.
	MaxAttachmentBytes = 32 << 20
	// MaxAttachments is the most attachments one message may carry.
	MaxAttachments = 64
)

// imageTypes are the image types the model APIs behind the agents accept
// inline (Anthropic Messages and OpenAI Responses both take exactly these);
// another image (a BMP, an icon) is stored but sent as a resource link.
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// ingested is a send's attachments once read: what the user message
// stores, and the blobs (sha256 hex → content) to put before it.
type ingested struct {
	attachments []transcript.Attachment
	blobs       map[string][]byte
}

// ingestAttachments reads the attachments of ochat/chat/send: each path
// (absolute, or relative to the workspace) must name a regular file inside
// the workspace (symlinks resolved, as for fs/*), an image at most
// MaxImageBytes whose content sniffs as an image/* type, a file at most
// MaxFileBytes, and MaxAttachmentBytes together. It fills Name (when
// empty), Path (workspace-relative as written, slash-separated), MimeType
// (sniffed for images, fileMimeType for files), Hash and Size. Any refusal is a -32602 error naming
// attachments[i] and nothing is read further; ingestAttachments itself
// stores nothing.
func (s *Server) ingestAttachments(in []transcript.Attachment) (ingested, error) {
	out := ingested{blobs: map[string][]byte{}}
	if len(in) == 0 {
		return out, nil
	}
	if len(in) > MaxAttachments {
		return out, fieldError("attachments", fmt.Sprintf("has %d entries; at most %d are accepted", len(in), MaxAttachments))
	}
	realRoot, err := filepath.EvalSymlinks(filepath.Clean(s.opts.Workspace))
	if err != nil {
		return out, fmt.Errorf("attachments: workspace %s: %w", s.opts.Workspace, err)
	}
	root, err := os.OpenRoot(realRoot)
	if err != nil {
		return out, fmt.Errorf("attachments: open workspace %s: %w", realRoot, err)
	}
	defer root.Close()
	total := 0
	for i, a := range in {
		field := fmt.Sprintf("attachments[%d].path", i)
		limit := MaxFileBytes
		if a.Kind == "image" {
			limit = MaxImageBytes
		}
		data, err := s.readAttachment(root, realRoot, a.Path, limit)
		if err != nil {
			return out, attachErr(field, err)
		}
		rel := s.workspaceRel(a.Path, realRoot)
		total += len(data)
		if total > MaxAttachmentBytes {
			return out, fieldError("attachments", fmt.Sprintf("are %s together; the limit is %s", mib(int64(total)), mib(MaxAttachmentBytes)))
		}
		sniffed := http.DetectContentType(data)
		switch a.Kind {
		case "image":
			if !strings.HasPrefix(sniffed, "image/") {
				return out, fieldError(fmt.Sprintf("attachments[%d].kind", i), fmt.Sprintf(`is "image" but %s is %s, not an image: attach it with kind "file"`, a.Path, sniffed))
			}
			a.MimeType = sniffed
		default:
			a.MimeType = fileMimeType(a.MimeType, rel, sniffed)
		}
		sum := sha256.Sum256(data)
		a.Hash = hex.EncodeToString(sum[:])
		a.Size = int64(len(data))
		a.Path = filepath.ToSlash(rel)
		if a.Name == "" {
			a.Name = filepath.Base(rel)
		}
		out.attachments = append(out.attachments, a)
		out.blobs[a.Hash] = data
	}
	return out, nil
}

// workspaceRel is p (already confined) relative to the workspace as the
// user wrote it: a symlink inside the workspace keeps its own name.
func (s *Server) workspaceRel(p, realRoot string) string {
	abs := s.absPath(p)
	for _, root := range []string{filepath.Clean(s.opts.Workspace), realRoot} {
		if rel, err := filepath.Rel(root, abs); err == nil && pathWithin(root, abs) {
			return rel
		}
	}
	return abs
}

// attachError is a refused attachment path; its message reads after the
// field name.
type attachError struct{ msg string }

func (e *attachError) Error() string { return e.msg }

// attachErr makes err a -32602 error naming field when it is a refusal
// (*attachError); any other error (the workspace itself unreadable) is
// returned as is.
func attachErr(field string, err error) error {
	var ae *attachError
	if errors.As(err, &ae) {
		return fieldError(field, ae.msg)
	}
	return err
}

// readAttachment confines p to the workspace (Server.confine) and reads it
// through root (an os.Root at realRoot, so a directory swapped for a symlink
// meanwhile is not followed out), refusing anything but a regular file of at
// most limit bytes. Refusals are *attachError.
func (s *Server) readAttachment(root *os.Root, realRoot, p string, limit int) ([]byte, error) {
	resolved, err := s.confine(p)
	if err != nil {
		return nil, &attachError{err.Error()}
	}
	rel, err := filepath.Rel(realRoot, resolved)
	if err != nil || !pathWithin(realRoot, resolved) {
		return nil, &attachError{fmt.Sprintf("%s is outside the workspace %s", p, s.opts.Workspace)}
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &attachError{fmt.Sprintf("%s: no such file in the workspace %s", p, s.opts.Workspace)}
	case err != nil && strings.Contains(err.Error(), "path escapes from parent"):
		return nil, &attachError{fmt.Sprintf("%s leads outside the workspace %s", p, s.opts.Workspace)}
	case err != nil:
		return nil, &attachError{fmt.Sprintf("%s cannot be read: %v", p, err)}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, &attachError{fmt.Sprintf("%s cannot be read: %v", p, err)}
	}
	if !fi.Mode().IsRegular() {
		return nil, &attachError{fmt.Sprintf("%s is %s, not a regular file", p, agents.FileKind(fi.Mode()))}
	}
	if fi.Size() > int64(limit) {
		return nil, &attachError{fmt.Sprintf("%s is %s; the limit is %s", p, mib(fi.Size()), mib(int64(limit)))}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, &attachError{fmt.Sprintf("%s cannot be read: %v", p, err)}
	}
	if len(data) > limit { // grew since Stat
		return nil, &attachError{fmt.Sprintf("%s grew past the %s limit while being read", p, mib(int64(limit)))}
	}
	return data, nil
}

// mib formats n bytes as MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// fileMimeType is a file attachment's MIME type: the editor's when it
// parses; else the sniffed one (net/http.DetectContentType) when the
// content is a raster image or the name claims one the content is not;
// else the one its extension maps to (mime.TypeByExtension); else the
// sniffed one.
func fileMimeType(given, path, sniffed string) string {
	if given != "" {
		if _, _, err := mime.ParseMediaType(given); err == nil {
			return given
		}
	}
	if strings.HasPrefix(sniffed, "image/") {
		return sniffed
	}
	ext := mime.TypeByExtension(filepath.Ext(path))
	if ext == "" || (strings.HasPrefix(ext, "image/") && ext != "image/svg+xml") {
		return sniffed
	}
	return ext
}

// putBlobs stores the blobs of in (history.Store.PutBlob) and checks each
// hash matches the one the attachment carries.
func (s *Server) putBlobs(in ingested) error {
	for h, data := range in.blobs {
		got, err := s.store.PutBlob(data)
		if err != nil {
			return fmt.Errorf("store attachment: %w", err)
		}
		if got != h {
			return fmt.Errorf("store attachment: blob hash %s, want %s", got, h)
		}
	}
	return nil
}

// reputMissingBlobs stores again any blob of in that is gone: a transaction
// that dropped the last other message referring to the same content may
// have deleted it between putBlobs and the transaction that stored the user
// message referring to it. Once that message is stored the blob stays.
func (s *Server) reputMissingBlobs(in ingested) {
	for h, data := range in.blobs {
		if _, err := s.store.Blob(h); errors.Is(err, history.ErrNotFound) {
			if _, err := s.store.PutBlob(data); err != nil {
				s.log.Warn("store attachment again", "hash", h, "err", err)
			}
		}
	}
}

// promptBudget is what the attachments of one prompt may add inline (bytes
// of JSON) once the text blocks are counted: the prompt travels as one line
// and MaxPromptBytes keeps it under the line cap of agents.
func promptBudget(blocks []acp.ContentBlock) int {
	n := MaxPromptBytes
	for _, b := range blocks {
		if b.Text != nil {
			n -= len(b.Text.Text)
		}
	}
	return max(n, 0)
}

// attachmentBlock is the prompt content block of one attachment (ACP
// "Content" and "Prompt Turn", promptCapabilities of initialize):
//
//   - an image of a type the model APIs accept inline (imageTypes, sniffed
//     from the content) becomes an image block (base64 data, mimeType, uri)
//     when the agent advertises promptCapabilities.image; so does a file
//     attachment whose MIME type is such an image type and that is at most
//     MaxImageBytes;
//   - a file of valid UTF-8 text of at most MaxEmbedBytes becomes an
//     embedded text resource (uri, text, mimeType) when the agent
//     advertises promptCapabilities.embeddedContext;
//   - anything else, or what no longer fits budget (bytes, decreased by
//     what is inlined), is a resource link (file:// URI) the agent reads
//     itself.
//
// The content comes from the store by Hash, so an edit or retry of an older
// message sends what was attached even after the file changed or went; a
// message stored before attachments had blobs is read from its path.
func (s *Server) attachmentBlock(a transcript.Attachment, caps acp.PromptCapabilities, budget *int) acp.ContentBlock {
	abs := s.absPath(a.Path)
	uri := "file://" + filepath.ToSlash(abs)
	name := a.Name
	if name == "" {
		name = filepath.Base(abs)
	}
	link := acp.ResourceLinkBlock(name, uri)
	if a.MimeType != "" {
		link.ResourceLink.MimeType = &a.MimeType
	}
	if a.Size > 0 {
		size := int(a.Size)
		link.ResourceLink.Size = &size
	}
	// A file that is an image (an @mention of a screenshot) goes as one too.
	isImage := a.Kind == "image" || (caps.Image && imageTypes[a.MimeType] && a.Size <= MaxImageBytes)
	if (isImage && !caps.Image) || (!isImage && !caps.EmbeddedContext) || (!isImage && a.Size > MaxEmbedBytes) {
		return link
	}
	data, err := s.attachmentData(a)
	if err != nil {
		s.log.Info("attachment sent as a link", "path", a.Path, "err", err)
		return link
	}
	if isImage {
		// The content decides: a stored image was sniffed already, a file
		// only named like one was not.
		sniffed := http.DetectContentType(data)
		n := base64.StdEncoding.EncodedLen(len(data))
		if imageTypes[sniffed] && len(data) <= MaxImageBytes && n <= *budget {
			*budget -= n
			blk := acp.ImageBlock(base64.StdEncoding.EncodeToString(data), sniffed)
			blk.Image.Uri = &uri
			return blk
		}
		if a.Kind == "image" || !caps.EmbeddedContext {
			return link
		}
	}
	mimeType := a.MimeType
	if len(data) > MaxEmbedBytes || !utf8.Valid(data) {
		return link
	}
	text := string(data)
	enc, err := json.Marshal(text)
	if err != nil || len(enc) > *budget {
		return link
	}
	*budget -= len(enc)
	if mimeType == "" {
		mimeType = "text/plain"
	}
	return acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{
		Uri: uri, Text: text, MimeType: &mimeType,
	}})
}

// attachmentData is the content of a stored attachment: its blob when it
// has a Hash, else (a message stored before attachments had blobs) its
// file, confined to the workspace and capped like a new attachment.
func (s *Server) attachmentData(a transcript.Attachment) ([]byte, error) {
	if a.Hash != "" {
		return s.store.Blob(a.Hash)
	}
	realRoot, err := filepath.EvalSymlinks(filepath.Clean(s.opts.Workspace))
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", s.opts.Workspace, err)
	}
	root, err := os.OpenRoot(realRoot)
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", realRoot, err)
	}
	defer root.Close()
	limit := MaxFileBytes
	if a.Kind == "image" {
		limit = MaxImageBytes
	}
	return s.readAttachment(root, realRoot, a.Path, limit)
}
