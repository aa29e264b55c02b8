package daemon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/history"
	"github.com/ochat-dev/ochat/transcript"
)

// newAttachEnv is a daemon with two scripted testagents: "vision"
// advertises promptCapabilities image and embeddedContext, "plain" none.
func newAttachEnv(t *testing.T) *testEnv {
	t.Helper()
	bin := testagent(t)
	cfg := t.TempDir()
	agent := func(caps string) map[string]any {
		return map[string]any{"command": bin, "env": map[string]string{"TESTAGENT_STATE": t.TempDir(), "TESTAGENT_PROMPT_CAPS": caps}}
	}
	settings := map[string]any{"agent_servers": map[string]any{"vision": agent("image,embeddedContext"), "plain": agent("none")}}
	b, _ := json.Marshal(settings)
	if err := os.MkdirAll(filepath.Join(cfg, "ochat"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "ochat", "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(o *Options) {
		o.StartAgent = nil
		o.LoadRegistry = nil
		o.UserConfigDir = cfg
	})
}

// pngBytes is a real w×h PNG.
func pngBytes(_ testing.TB, w, h int, c color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(err) // an in-memory RGBA always encodes
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeWS(t *testing.T, e *testEnv, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(e.ws, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runBlocks runs one turn and returns the stored conversation and the text of
// its last assistant message.
func runBlocks(t *testing.T, c *Client, res SendResult) ([]transcript.Message, string) {
	t.Helper()
	log := collect(t, c, res.TurnID, nil)
	if log.terminal().Type != transcript.EvTurnCompleted {
		t.Fatalf("turn ended %+v", log.terminal())
	}
	got := call[GetConversationResult](t, c, MethodConversationsGet, ConversationParams{ConversationID: res.ConversationID})
	msgs := got.Messages
	var text strings.Builder
	for _, sg := range msgs[len(msgs)-1].Segments {
		if sg.Type == transcript.SegContent {
			text.WriteString(sg.Content)
		}
	}
	return msgs, text.String()
}

func TestAttachmentPromptBlocks(t *testing.T) {
	e := newAttachEnv(t)
	c := e.dial("a")
	red := pngBytes(t, 4, 3, color.RGBA{255, 0, 0, 255})
	notes := []byte("# Notes\nline two, ünïcode\n")
	binary := []byte{0x00, 0xff, 0xfe, 0x01, 0x02}
	big := bytes.Repeat([]byte("a"), MaxEmbedBytes+1)
	bmp := append([]byte("BM"), make([]byte, 64)...)
	writeWS(t, e, "shots/red.png", red)
	writeWS(t, e, "notes.md", notes)
	writeWS(t, e, "data.bin", binary)
	writeWS(t, e, "big.txt", big)
	writeWS(t, e, "old.bmp", bmp)
	fakePNG := []byte("just text in a .png\n")
	writeWS(t, e, "fake.png", fakePNG)
	if err := os.Symlink("shots/red.png", filepath.Join(e.ws, "latest.png")); err != nil {
		t.Fatal(err)
	}
	uri := func(rel string) string { return "file://" + filepath.Join(e.ws, rel) }

	tests := []struct {
		name     string
		agent    string
		att      transcript.Attachment
		data     []byte
		wantMime string // prefix
		want     string // the BLOCKS line of the attachment
	}{
		{"image to a vision agent", "vision", transcript.Attachment{Kind: "image", Path: "shots/red.png"}, red, "image/png",
			fmt.Sprintf("image image/png %s %d %s", uri("shots/red.png"), len(red), sha(red))},
		{"absolute path, wrong mime from the editor", "vision", transcript.Attachment{Kind: "image", Path: filepath.Join(e.ws, "shots/red.png"), MimeType: "image/jpeg"}, red, "image/png",
			fmt.Sprintf("image image/png %s %d %s", uri("shots/red.png"), len(red), sha(red))},
		{"symlink inside keeps its name", "vision", transcript.Attachment{Kind: "image", Path: "./latest.png"}, red, "image/png",
			fmt.Sprintf("image image/png %s %d %s", uri("latest.png"), len(red), sha(red))},
		{"image to an agent without image", "plain", transcript.Attachment{Kind: "image", Path: "shots/red.png"}, red, "image/png",
			"link red.png " + uri("shots/red.png")},
		{"file that is a PNG to a vision agent", "vision", transcript.Attachment{Kind: "file", Path: "shots/red.png"}, red, "image/png",
			fmt.Sprintf("image image/png %s %d %s", uri("shots/red.png"), len(red), sha(red))},
		{"file that is a PNG to an agent without image", "plain", transcript.Attachment{Kind: "file", Path: "shots/red.png"}, red, "image/png",
			"link red.png " + uri("shots/red.png")},
		{"file named .png that is text is embedded", "vision", transcript.Attachment{Kind: "file", Path: "fake.png"}, fakePNG, "text/plain; charset=utf-8",
			fmt.Sprintf("resource text/plain; charset=utf-8 %s %d %s", uri("fake.png"), len(fakePNG), sha(fakePNG))},
		{"text file embedded", "vision", transcript.Attachment{Kind: "file", Path: "notes.md", MimeType: "text/markdown"}, notes, "text/markdown",
			fmt.Sprintf("resource text/markdown %s %d %s", uri("notes.md"), len(notes), sha(notes))},
		{"text file to an agent without embeddedContext", "plain", transcript.Attachment{Kind: "file", Path: "notes.md", Name: "My notes"}, notes, "",
			"link My notes " + uri("notes.md")},
		{"binary file is a link", "vision", transcript.Attachment{Kind: "file", Path: "data.bin"}, binary, "application/octet-stream",
			"link data.bin " + uri("data.bin")},
		{"text over the embed cap is a link", "vision", transcript.Attachment{Kind: "file", Path: "big.txt"}, big, "text/plain",
			"link big.txt " + uri("big.txt")},
		{"image type models refuse is a link", "vision", transcript.Attachment{Kind: "image", Path: "old.bmp"}, bmp, "image/bmp",
			"link old.bmp " + uri("old.bmp")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: tt.agent, Text: "BLOCKS", Attachments: []transcript.Attachment{tt.att}})
			msgs, text := runBlocks(t, c, res)
			if want := "text 6\n" + tt.want; text != want {
				t.Errorf("agent saw\n%s\nwant\n%s", text, want)
			}
			a := msgs[0].Attachments[0]
			if a.Hash != sha(tt.data) || a.Size != int64(len(tt.data)) || !strings.HasPrefix(a.MimeType, tt.wantMime) || filepath.IsAbs(a.Path) || strings.Contains(a.Path, "./") || a.Name == "" {
				t.Errorf("stored attachment %+v; want hash %s, size %d, mime %s…, a relative path", a, sha(tt.data), len(tt.data), tt.wantMime)
			}
			blob, err := e.store.Blob(a.Hash)
			if err != nil || !bytes.Equal(blob, tt.data) {
				t.Errorf("blob %s: %v (%d bytes, want %d)", a.Hash, err, len(blob), len(tt.data))
			}
		})
	}
}

func TestAttachmentRefused(t *testing.T) {
	e := newAttachEnv(t)
	c := e.dial("a")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.png"), pngBytes(t, 1, 1, color.Black), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(e.ws, "escape")); err != nil {
		t.Fatal(err)
	}
	writeWS(t, e, "ok.png", pngBytes(t, 2, 2, color.White))
	writeWS(t, e, "huge.png", append(pngBytes(t, 1, 1, color.White), make([]byte, MaxImageBytes)...))
	writeWS(t, e, "text.png", []byte("not an image at all\n"))
	writeWS(t, e, "dir/keep", []byte("x"))
	if err := syscall.Mkfifo(filepath.Join(e.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(e.ws, "huge.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rel, _ := filepath.Rel(e.ws, filepath.Join(outside, "secret.png"))

	ok := transcript.Attachment{Kind: "image", Path: "ok.png"}
	tests := []struct {
		name string
		atts []transcript.Attachment
		want []string // in the error message
	}{
		{"relative path outside", []transcript.Attachment{ok, {Kind: "image", Path: rel}}, []string{"attachments[1].path", "outside the workspace"}},
		{"absolute path outside", []transcript.Attachment{{Kind: "image", Path: filepath.Join(outside, "secret.png")}}, []string{"attachments[0].path", "outside the workspace"}},
		{"symlink out", []transcript.Attachment{{Kind: "image", Path: "escape/secret.png"}}, []string{"attachments[0].path", "outside the workspace"}},
		{"missing", []transcript.Attachment{{Kind: "file", Path: "nope.txt"}}, []string{"attachments[0].path", "no such file"}},
		{"directory", []transcript.Attachment{{Kind: "file", Path: "dir"}}, []string{"attachments[0].path", "a directory"}},
		{"fifo", []transcript.Attachment{{Kind: "file", Path: "fifo"}}, []string{"attachments[0].path", "a named pipe"}},
		{"image over the cap", []transcript.Attachment{ok, {Kind: "image", Path: "huge.png"}}, []string{"attachments[1].path", "the limit is 5.0 MiB"}},
		{"file over the cap", []transcript.Attachment{{Kind: "file", Path: "huge.log"}}, []string{"attachments[0].path", "the limit is 10.0 MiB"}},
		{"image that is text", []transcript.Attachment{{Kind: "image", Path: "text.png"}}, []string{"attachments[0].kind", "not an image"}},
		{"bad kind", []transcript.Attachment{{Kind: "video", Path: "ok.png"}}, []string{"attachments[0].kind"}},
		{"no path", []transcript.Attachment{{Kind: "file"}}, []string{"attachments[0].path", "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := callErr(t, c, MethodChatSend, SendParams{Agent: "vision", Text: "BLOCKS", Attachments: tt.atts}, jsonrpc2.InvalidParams)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			st, err := e.store.Stats()
			if err != nil {
				t.Fatal(err)
			}
			if st.Blobs != 0 || st.Conversations != 0 || st.Messages != 0 {
				t.Errorf("a refused send stored something: %+v", st)
			}
		})
	}
}

func TestAttachmentRetryFromBlob(t *testing.T) {
	e := newAttachEnv(t)
	c := e.dial("a")
	red := pngBytes(t, 3, 3, color.RGBA{255, 0, 0, 255})
	blue := pngBytes(t, 3, 3, color.RGBA{0, 0, 255, 255})
	writeWS(t, e, "a.png", red)
	writeWS(t, e, "b.png", red) // same content: one blob
	atts := []transcript.Attachment{{Kind: "image", Path: "a.png"}, {Kind: "image", Path: "b.png"}}
	res := call[SendResult](t, c, MethodChatSend, SendParams{Agent: "vision", Text: "BLOCKS", Attachments: atts})
	_, first := runBlocks(t, c, res)
	if st, _ := e.store.Stats(); st.Blobs != 1 {
		t.Errorf("two attachments of the same content stored %d blobs", st.Blobs)
	}
	imgLine := func(rel string, data []byte) string {
		return fmt.Sprintf("image image/png file://%s %d %s", filepath.Join(e.ws, rel), len(data), sha(data))
	}
	want := "text 6\n" + imgLine("a.png", red) + "\n" + imgLine("b.png", red)
	if first != want {
		t.Fatalf("first turn: agent saw\n%s\nwant\n%s", first, want)
	}

	// The file changes, then goes: a retry and an edit still send what was
	// attached.
	writeWS(t, e, "a.png", blue)
	if err := os.Remove(filepath.Join(e.ws, "b.png")); err != nil {
		t.Fatal(err)
	}
	res = call[SendResult](t, c, MethodChatRetry, RetryParams{ConversationID: res.ConversationID, MessageID: res.AssistantMessageID})
	if _, got := runBlocks(t, c, res); got != want {
		t.Errorf("retry: agent saw\n%s\nwant\n%s", got, want)
	}
	res = call[SendResult](t, c, MethodChatEdit, EditParams{ConversationID: res.ConversationID, MessageID: res.UserMessageID, Text: "BLOCKS again"})
	msgs, got := runBlocks(t, c, res)
	if want := strings.Replace(want, "text 6", "text 12", 1); got != want {
		t.Errorf("edit: agent saw\n%s\nwant\n%s", got, want)
	}
	if len(msgs) != 2 || len(msgs[0].Attachments) != 2 {
		t.Fatalf("after edit: %+v", msgs)
	}
	if st, _ := e.store.Stats(); st.Blobs != 1 {
		t.Errorf("after retry and edit the store has %d blobs, want 1", st.Blobs)
	}

	// Deleting the conversation drops the blob.
	call[struct{}](t, c, MethodConversationsDelete, ConversationParams{ConversationID: res.ConversationID})
	if st, _ := e.store.Stats(); st.Blobs != 0 {
		t.Errorf("after delete the store has %d blobs", st.Blobs)
	}
}

// A user message stored before attachments had blobs (no Hash) is sent from
// its path.
func TestAttachmentWithoutHash(t *testing.T) {
	e := newAttachEnv(t)
	c := e.dial("a")
	notes := []byte("legacy notes\n")
	writeWS(t, e, "legacy.txt", notes)
	conv := call[ConversationResult](t, c, MethodConversationsCreate, CreateConversationParams{})
	user := transcript.Message{ID: e.srv.newID(), Timestamp: nowMs(), Role: transcript.RoleUser, Content: "BLOCKS",
		Attachments: []transcript.Attachment{{Kind: "file", Path: "legacy.txt"}, {Kind: "image", Path: "gone.png"}}}
	err := e.store.Update(func(w *history.Writer) error { return w.PutMessage(conv.Conversation.ID, user, nowMs()) })
	if err != nil {
		t.Fatal(err)
	}
	res := call[SendResult](t, c, MethodChatRetry, RetryParams{ConversationID: conv.Conversation.ID, MessageID: user.ID, Agent: "vision"})
	_, got := runBlocks(t, c, res)
	want := fmt.Sprintf("text 6\nresource text/plain %s %d %s\nlink gone.png %s", "file://"+filepath.Join(e.ws, "legacy.txt"), len(notes), sha(notes), "file://"+filepath.Join(e.ws, "gone.png"))
	if got != want {
		t.Errorf("agent saw\n%s\nwant\n%s", got, want)
	}
}

// An inline block that does not fit what is left of the prompt line is a
// resource link; one that fits uses up its share.
func TestAttachmentBlockBudget(t *testing.T) {
	e := newEnv(t, nil)
	img := pngBytes(t, 8, 8, color.White)
	text := []byte("quote \" and newline \n")
	imgHash, err := e.store.PutBlob(img)
	if err != nil {
		t.Fatal(err)
	}
	textHash, err := e.store.PutBlob(text)
	if err != nil {
		t.Fatal(err)
	}
	imgAtt := transcript.Attachment{Kind: "image", Path: "i.png", MimeType: "image/png", Hash: imgHash, Size: int64(len(img))}
	textAtt := transcript.Attachment{Kind: "file", Path: "t.txt", MimeType: "text/plain", Hash: textHash, Size: int64(len(text))}
	imgCost := (len(img) + 2) / 3 * 4
	enc, _ := json.Marshal(string(text))
	textCost := len(enc)
	all := acp.PromptCapabilities{Image: true, EmbeddedContext: true}
	tests := []struct {
		name       string
		att        transcript.Attachment
		budget     int
		wantInline bool
		wantLeft   int
	}{
		{"image fits exactly", imgAtt, imgCost, true, 0},
		{"image one byte short", imgAtt, imgCost - 1, false, imgCost - 1},
		{"text fits", textAtt, textCost + 5, true, 5},
		{"text one byte short", textAtt, textCost - 1, false, textCost - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := tt.budget
			b := e.srv.attachmentBlock(tt.att, all, &budget)
			inline := b.Image != nil || b.Resource != nil
			if inline != tt.wantInline || budget != tt.wantLeft {
				t.Errorf("inline %v, budget left %d; want %v, %d (block %+v)", inline, budget, tt.wantInline, tt.wantLeft, b)
			}
			if !inline && (b.ResourceLink == nil || b.ResourceLink.Size == nil || *b.ResourceLink.Size != int(tt.att.Size)) {
				t.Errorf("fallback is not a resource link with the size: %+v", b)
			}
		})
	}
	if got := promptBudget([]acp.ContentBlock{acp.TextBlock("abc"), acp.TextBlock(strings.Repeat("x", MaxPromptBytes))}); got != 0 {
		t.Errorf("promptBudget of an over-long prompt = %d", got)
	}
}

func TestFileMimeType(t *testing.T) {
	tests := []struct {
		given, path, sniffed, want string
	}{
		{"text/x-go", "main.go", "text/plain; charset=utf-8", "text/x-go"},
		{"not a mime type", "x.json", "text/plain; charset=utf-8", "application/json"},
		{"", "shot.jpg", "image/png", "image/png"},                                  // the content wins over the name
		{"", "notes.png", "text/plain; charset=utf-8", "text/plain; charset=utf-8"}, // a name that lies
		{"", "logo.svg", "text/xml; charset=utf-8", "image/svg+xml"},
		{"", "page.html", "text/html; charset=utf-8", "text/html; charset=utf-8"},
		{"", "data.unknownext", "application/octet-stream", "application/octet-stream"},
	}
	for _, tt := range tests {
		if got := fileMimeType(tt.given, tt.path, tt.sniffed); got != tt.want {
			t.Errorf("fileMimeType(%q, %q, %q) = %q, want %q", tt.given, tt.path, tt.sniffed, got, tt.want)
		}
	}
}

// BenchmarkAttachmentBlock is the prompt-time cost of one image attachment
// of 1 MiB: the blob read from the store, the sniff and the base64.
func BenchmarkAttachmentBlock(b *testing.B) {
	e := newEnv(b, nil)
	data := append(pngBytes(nil, 1, 1, color.White), bytes.Repeat([]byte{0x5a}, 1<<20)...)
	h, err := e.store.PutBlob(data)
	if err != nil {
		b.Fatal(err)
	}
	a := transcript.Attachment{Kind: "image", Path: "big.png", MimeType: "image/png", Hash: h, Size: int64(len(data))}
	caps := acp.PromptCapabilities{Image: true}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		budget := MaxPromptBytes
		if blk := e.srv.attachmentBlock(a, caps, &budget); blk.Image == nil {
			b.Fatal("not an image block")
		}
	}
}
