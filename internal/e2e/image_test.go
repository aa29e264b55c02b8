package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ochat-dev/ochat/daemon"
	"github.com/ochat-dev/ochat/transcript"
)

// modelImage is one inline image a model request carries.
type modelImage struct {
	mimeType string
	data     []byte
}

// requestImages walks a decoded model request body for inline images:
// Anthropic Messages content blocks {"type":"image","source":{"type":
// "base64","media_type","data"}} and OpenAI Responses input items
// {"type":"input_image","image_url":"data:<mime>;base64,<data>"}.
func requestImages(v any) []modelImage {
	var out []modelImage
	switch v := v.(type) {
	case map[string]any:
		if src, ok := v["source"].(map[string]any); ok && v["type"] == "image" && src["type"] == "base64" {
			data, _ := base64.StdEncoding.DecodeString(str(src["data"]))
			out = append(out, modelImage{str(src["media_type"]), data})
		}
		if url, ok := v["image_url"].(string); ok && v["type"] == "input_image" {
			if head, b64, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,"); ok {
				data, _ := base64.StdEncoding.DecodeString(b64)
				out = append(out, modelImage{head, data})
			}
		}
		for _, x := range v {
			out = append(out, requestImages(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, requestImages(x)...)
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// TestDaemonImage sends a PNG and a text file as attachments through the
// daemon to real claude-agent-acp and codex-acp and proves from the fake
// model's request log that the model received the image inline (the bytes
// of the file) and the file's text.
func TestDaemonImage(t *testing.T) {
	w := newHandoffWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := w.d.client(ctx)

	img := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for x := range 16 {
		for y := range 16 {
			img.Set(x, y, color.RGBA{uint8(x * 16), uint8(y * 16), 200, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	pngData := buf.Bytes()
	if err := os.MkdirAll(filepath.Join(w.ws, "shots"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.ws, "shots", "gradient.png"), pngData, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, agent := range []string{"claude", "codex"} {
		t.Run(agent, func(t *testing.T) {
			token := "embedded-token-" + agent + "-7f3a"
			note := filepath.Join(w.ws, "note-"+agent+".txt")
			if err := os.WriteFile(note, []byte("The secret word is "+token+".\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			text := "please describe the attached image for " + agent
			before := w.lastSeq()
			var res daemon.SendResult
			err := c.Call(ctx, daemon.MethodChatSend, daemon.SendParams{Agent: agent, Text: text, Attachments: []transcript.Attachment{
				{Kind: "image", Path: "shots/gradient.png"},
				{Kind: "file", Path: filepath.Base(note)},
			}}, &res)
			if err != nil {
				t.Fatalf("chat/send: %v", err)
			}
			tr := collectTurn(ctx, t, c, res, text)
			if f := tr.final(); f.Type != transcript.EvTurnCompleted {
				t.Fatalf("turn ended %+v", f)
			}
			req := w.mainRequest(t, agent, text, before)
			imgs := requestImages(req.Body)
			found := false
			for _, im := range imgs {
				found = found || (im.mimeType == "image/png" && bytes.Equal(im.data, pngData))
			}
			if !found {
				t.Errorf("model request #%d has %d inline images, none the attached PNG (%d bytes)", req.Seq, len(imgs), len(pngData))
				for _, im := range imgs {
					t.Logf("image %s, %d bytes", im.mimeType, len(im.data))
				}
			}
			if !bytes.Contains(req.RawBody, []byte(token)) {
				t.Errorf("model request #%d does not carry the attached file's text %q", req.Seq, token)
			}
		})
	}
}
