package testagent

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

// client is a minimal ACP client recording the updates it gets.
type client struct {
	mu      sync.Mutex
	kinds   []string
	text    strings.Builder
	allowed bool
}

func (c *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound("fs/read_text_file")
}
func (c *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound("fs/write_text_file")
}
func (c *client) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	if c.allowed {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(p.Options[0].OptionId)}, nil
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}
func (c *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := n.Update
	switch {
	case u.UserMessageChunk != nil:
		c.kinds = append(c.kinds, "user")
	case u.AgentMessageChunk != nil:
		c.kinds = append(c.kinds, "agent")
		if u.AgentMessageChunk.Content.Text != nil {
			c.text.WriteString(u.AgentMessageChunk.Content.Text.Text)
		}
	case u.ToolCall != nil:
		c.kinds = append(c.kinds, "tool_call")
	case u.UsageUpdate != nil:
		c.kinds = append(c.kinds, "usage")
	case u.AvailableCommandsUpdate != nil:
		c.kinds = append(c.kinds, "commands")
	case u.SessionInfoUpdate != nil:
		c.kinds = append(c.kinds, "info")
	}
	return nil
}
func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound("terminal/create")
}
func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, nil
}
func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, nil
}
func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, nil
}
func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, nil
}

// run starts an in-process agent with opt and returns a client connection.
func run(t *testing.T, opt Options) (*acp.ClientSideConnection, *client) {
	t.Helper()
	toAgentR, toAgentW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = Run(toAgentR, toClientW, opt)
		toClientW.Close()
		close(done)
	}()
	c := &client{allowed: true}
	conn := acp.NewClientSideConnection(c, toAgentW, toClientR)
	t.Cleanup(func() {
		toAgentW.Close()
		<-done
	})
	if _, err := conn.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	return conn, c
}

func TestPersistAndReplay(t *testing.T) {
	dir := t.TempDir()
	cwd := t.TempDir()
	conn, c := run(t, Options{StateDir: dir})
	s, err := conn.NewSession(context.Background(), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"PLAIN one two three", "hello"} {
		r, err := conn.Prompt(context.Background(), acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock(p)}})
		if err != nil || r.StopReason != acp.StopReasonEndTurn {
			t.Fatalf("prompt %q: %v %v", p, r.StopReason, err)
		}
	}
	if got := c.text.String(); got != "one two threeecho: hello" {
		t.Errorf("text = %q", got)
	}
	if got := strings.Join(c.kinds, ","); got != "commands,agent,agent,agent,info,usage,agent,usage" {
		t.Errorf("kinds = %s", got)
	}

	// A second agent process with the same state dir replays both turns.
	conn2, c2 := run(t, Options{StateDir: dir})
	if _, err := conn2.LoadSession(context.Background(), acp.LoadSessionRequest{SessionId: s.SessionId, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c2.kinds, ","); got != "user,agent,tool_call,user,agent" {
		t.Errorf("replay kinds = %s", got)
	}
	if got := c2.text.String(); got != "one two threeecho: hello" {
		t.Errorf("replayed text = %q", got)
	}
	if _, err := conn2.LoadSession(context.Background(), acp.LoadSessionRequest{SessionId: "nope", Cwd: cwd, McpServers: []acp.McpServer{}}); err == nil {
		t.Error("loading an unknown session succeeded")
	}
}

func TestSplitN(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"abcdef", 3, "ab|cd|ef"},
		{"ab", 3, "ab"},
		{"héllo wörld", 3, "héll|o wö|rld"},
	}
	for _, tt := range tests {
		if got := strings.Join(splitN(tt.s, tt.n), "|"); got != tt.want {
			t.Errorf("splitN(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestPromptCaps(t *testing.T) {
	tests := []struct {
		env  *string
		want acp.PromptCapabilities
	}{
		{nil, acp.PromptCapabilities{EmbeddedContext: true}},
		{ptr("none"), acp.PromptCapabilities{}},
		{ptr("image"), acp.PromptCapabilities{Image: true}},
		{ptr("image, embeddedContext,audio"), acp.PromptCapabilities{Image: true, Audio: true, EmbeddedContext: true}},
	}
	for _, tt := range tests {
		var opt Options
		if tt.env != nil {
			opt.PromptCaps = ParsePromptCaps(*tt.env)
		}
		conn, _ := run(t, opt)
		resp, err := conn.Initialize(context.Background(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.AgentCapabilities.PromptCapabilities; got.Image != tt.want.Image || got.Audio != tt.want.Audio || got.EmbeddedContext != tt.want.EmbeddedContext {
			t.Errorf("caps %v: got %+v, want %+v", tt.env, got, tt.want)
		}
	}
}

func TestBlocksScenario(t *testing.T) {
	conn, c := run(t, Options{})
	s, err := conn.NewSession(context.Background(), acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	img := acp.ImageBlock("aGVsbG8=", "image/png") // "hello"
	img.Image.Uri = ptr("file:///w/a.png")
	mt := "text/x-go"
	prompt := []acp.ContentBlock{
		acp.TextBlock("BLOCKS"),
		img,
		acp.ResourceBlock(acp.EmbeddedResourceResource{TextResourceContents: &acp.TextResourceContents{Uri: "file:///w/m.go", Text: "hello", MimeType: &mt}}),
		acp.ResourceLinkBlock("r.md", "file:///w/r.md"),
		acp.ImageBlock("!!", "image/png"),
	}
	if _, err := conn.Prompt(context.Background(), acp.PromptRequest{SessionId: s.SessionId, Prompt: prompt}); err != nil {
		t.Fatal(err)
	}
	const hello = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
	want := strings.Join([]string{
		"text 6",
		"image image/png file:///w/a.png 5 " + hello,
		"resource text/x-go file:///w/m.go 5 " + hello,
		"link r.md file:///w/r.md",
		"image image/png - - bad-base64",
	}, "\n")
	if got := c.text.String(); got != want {
		t.Errorf("BLOCKS answered\n%s\nwant\n%s", got, want)
	}
}
