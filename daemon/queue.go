package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.lsp.dev/jsonrpc2"

	"github.com/ochat-dev/ochat/agents"
	"github.com/ochat-dev/ochat/history"
)

// The message queue (docs/protocol.md "Queue"): a message sent while a turn
// of its conversation runs waits in the conversation's queue, stored in the
// history store, and is sent as the next turn when the running one ends —
// completed, cancelled or failed. Every change goes to the conversation's
// subscribers as ochat/queue with the whole list.
//
// Locking: Server.qmu serialises every change of a queue with its store
// write (so the store and s.queues agree, and a queued message is sent once);
// it is taken before s.mu and never while s.mu is held.

// Method and notification names of the queue.
const (
	MethodQueueUpdate  = "ochat/queue/update"
	MethodQueueRemove  = "ochat/queue/remove"
	MethodQueueSendNow = "ochat/queue/sendNow"

	NotifyQueue = "ochat/queue"
)

// QueueParams are an ochat/queue notification's params: the conversation's
// whole queue, oldest (next to be sent) first. Sent is set when the change is
// the daemon starting the queued message Sent.ID as a turn.
type QueueParams struct {
	ConversationID string                  `json:"conversationId"`
	Items          []history.QueuedMessage `json:"items"`
	Sent           *QueueSent              `json:"sent,omitempty"`
}

// QueueSent names the turn a queued message became.
type QueueSent struct {
	ID                 string `json:"id"`
	UserMessageID      string `json:"userMessageId"`
	AssistantMessageID string `json:"assistantMessageId"`
	TurnID             string `json:"turnId"`
}

// QueueItemParams name one queued message (update, remove, sendNow); Text is
// update's new text.
type QueueItemParams struct {
	ConversationID string `json:"conversationId"`
	ID             string `json:"id"`
	Text           string `json:"text,omitempty"`
}

func (p *QueueItemParams) validate() error {
	if err := required("conversationId", p.ConversationID); err != nil {
		return err
	}
	return required("id", p.ID)
}

// QueueResult answers ochat/queue/update, remove and sendNow with the queue
// as it now is; Cancelled (sendNow) says a running turn was cancelled so that
// the message goes next.
type QueueResult struct {
	ConversationID string                  `json:"conversationId"`
	Items          []history.QueuedMessage `json:"items"`
	Cancelled      bool                    `json:"cancelled,omitempty"`
}

// MaxQueued is the most messages one conversation's queue holds (the queue
// is stored whole on every change); a send beyond it is refused with -32003.
const MaxQueued = 100

// queueRetry is how long a queued message that could not start because its
// conversation was being synced with its native session waits to try again.
const queueRetry = time.Second

// errQueueBusy: the queued message could not start because a turn runs.
var errQueueBusy = errors.New("a turn is running")

// loadQueues reads every stored queue (once, before the first client).
func (s *Server) loadQueues() {
	qs, err := s.store.Queues()
	if err != nil {
		s.log.Error("read queued messages", "err", err)
		return
	}
	s.mu.Lock()
	for id, q := range qs {
		s.queues[id] = q
	}
	s.mu.Unlock()
}

// resumeQueues sends the next queued message of every conversation whose
// queue outlived the daemon: the turn it waited for ended when the daemon
// stopped.
func (s *Server) resumeQueues() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.queues))
	for id := range s.queues {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		s.log.Info("sending a message queued before the daemon stopped", "conversation", id)
		go s.sendQueued(id)
	}
}

// queueLocked returns a copy of a conversation's queue, never nil. s.mu is
// held.
func (s *Server) queueLocked(convID string) []history.QueuedMessage {
	return append([]history.QueuedMessage{}, s.queues[convID]...)
}

// turnEnded sends the conversation's next queued message, if any, once its
// turn has ended.
func (s *Server) turnEnded(convID string) {
	s.mu.Lock()
	n := len(s.queues[convID])
	s.mu.Unlock()
	if n > 0 {
		go s.sendQueued(convID)
	}
}

// enqueue stores a message sent while a turn runs (or while older messages
// wait) at the end of the conversation's queue, subscribes the sender and
// answers {queued, queueId}.
func (s *Server) enqueue(c *client, convID, agent string, req turnRequest, reply jsonrpc2.Replier) (any, error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.mu.Lock()
	n := len(s.queues[convID])
	s.mu.Unlock()
	if n >= MaxQueued { // before the attachments are stored: a refused send stores nothing
		return nil, jsonrpc2.Errorf(CodeConflict, "%d messages are already queued in conversation %s: wait for the running turn, or remove some (ochat/queue/remove)", n, convID)
	}
	if err := s.putBlobs(req.blobs); err != nil {
		return nil, err
	}
	item := history.QueuedMessage{ID: s.newID(), Text: req.text, Agent: agent, Attachments: req.attachments, CreatedAt: nowMs()}
	_, err := s.changeQueueLocked(convID, func(q []history.QueuedMessage) ([]history.QueuedMessage, error) {
		return append(q, item), nil
	}, func(t *topic) {
		if c != nil {
			t.subs[c] = struct{}{}
			c.subs[convID] = struct{}{}
			c.queueReply(reply, SendResult{ConversationID: convID, Queued: true, QueueID: item.ID}, nil)
		}
	})
	if err != nil {
		return nil, err
	}
	s.reputMissingBlobs(req.blobs)
	s.log.Info("message queued behind the running turn", "conversation", convID, "queueId", item.ID, "agent", agent)
	s.mu.Lock()
	idle := s.topics[convID] == nil || s.topics[convID].run == nil
	s.mu.Unlock()
	if idle { // the turn ended while this was being stored
		go s.sendQueued(convID)
	}
	return nil, errReplied
}

// changeQueueLocked applies f to a copy of the conversation's queue, stores
// the result, makes it the live queue and tells the subscribers (ochat/queue).
// before, if set, runs under s.mu with the conversation's topic just before
// the notification is queued. s.qmu is held (every change of a queue holds
// it, so f may read the store without s.mu).
func (s *Server) changeQueueLocked(convID string, f func([]history.QueuedMessage) ([]history.QueuedMessage, error), before func(*topic)) ([]history.QueuedMessage, error) {
	s.mu.Lock()
	cur := s.queueLocked(convID)
	s.mu.Unlock()
	q, err := f(cur)
	if err != nil {
		return nil, err
	}
	if err := s.store.PutQueue(convID, q); err != nil {
		return nil, storeErr("store queue", convID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setQueueLocked(convID, q)
	t := s.topicLocked(convID)
	if before != nil {
		before(t)
	}
	s.broadcastLocked(t, NotifyQueue, QueueParams{ConversationID: convID, Items: s.queueLocked(convID)})
	s.dropTopicLocked(t)
	return s.queueLocked(convID), nil
}

// setQueueLocked makes q the live queue of convID. s.mu is held.
func (s *Server) setQueueLocked(convID string, q []history.QueuedMessage) {
	if len(q) == 0 {
		delete(s.queues, convID)
		return
	}
	s.queues[convID] = q
}

// sendQueued starts the conversation's oldest queued message as a turn when
// no turn runs. The message leaves the queue in the transaction that stores
// it as the user message (startTurn), so it is neither lost nor sent twice.
func (s *Server) sendQueued(convID string) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	s.mu.Lock()
	q := s.queueLocked(convID)
	t := s.topics[convID]
	busy := s.closed || (t != nil && t.run != nil)
	s.mu.Unlock()
	if len(q) == 0 || busy {
		return // a running turn's end sends it; a stopping daemon keeps it stored
	}
	item := q[0]
	_, err := s.startTurn(nil, turnRequest{
		convID: convID, agent: item.Agent, text: item.Text, attachments: item.Attachments,
		queued: &item, queueRest: q[1:],
	}, nil)
	var je *jsonrpc2.Error
	switch {
	case err == nil, errors.Is(err, errReplied), errors.Is(err, errQueueBusy):
	case errors.As(err, &je) && je.Code == CodeNotFound: // the conversation is gone
		s.mu.Lock()
		delete(s.queues, convID)
		s.mu.Unlock()
	case errors.As(err, &je) && je.Code == CodeConflict: // a native sync holds the conversation: try again
		time.AfterFunc(queueRetry, func() { s.sendQueued(convID) })
	default: // kept; the next send or turn end of the conversation tries again
		s.log.Warn("send queued message", "conversation", convID, "queueId", item.ID, "err", err)
	}
}

// queueSentLocked makes rest the live queue once the queued message item is
// stored as a turn, and tells the subscribers which turn it became. s.mu is
// held.
func (s *Server) queueSentLocked(t *topic, item *history.QueuedMessage, rest []history.QueuedMessage, res SendResult) {
	s.setQueueLocked(t.id, rest)
	s.broadcastLocked(t, NotifyQueue, QueueParams{
		ConversationID: t.id, Items: s.queueLocked(t.id),
		Sent: &QueueSent{ID: item.ID, UserMessageID: res.UserMessageID, AssistantMessageID: res.AssistantMessageID, TurnID: res.TurnID},
	})
}

// queueIndex finds the queued message id, or answers -32602 (-32001 for an
// unknown conversation).
func (s *Server) queueIndex(q []history.QueuedMessage, convID, id string) (int, error) {
	if i := slices.IndexFunc(q, func(m history.QueuedMessage) bool { return m.ID == id }); i >= 0 {
		return i, nil
	}
	if _, err := s.store.Conversation(convID); err != nil {
		return -1, storeErr("queue", convID, err)
	}
	return -1, fieldError("id", fmt.Sprintf("%q is not a queued message of conversation %s (it may have been sent or removed already)", id, convID))
}

// queueUpdate handles ochat/queue/update: a queued message's new text.
func (s *Server) queueUpdate(p QueueItemParams) (any, error) {
	if strings.TrimSpace(p.Text) == "" {
		return nil, fieldError("text", "is required and must not be blank (use ochat/queue/remove to drop the message)")
	}
	if err := checkPromptSize(p.Text); err != nil {
		return nil, err
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	q, err := s.changeQueueLocked(p.ConversationID, func(q []history.QueuedMessage) ([]history.QueuedMessage, error) {
		i, err := s.queueIndex(q, p.ConversationID, p.ID)
		if err != nil {
			return nil, err
		}
		q[i].Text = p.Text
		return q, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return QueueResult{ConversationID: p.ConversationID, Items: q}, nil
}

// queueRemove handles ochat/queue/remove.
func (s *Server) queueRemove(p QueueItemParams) (any, error) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	q, err := s.changeQueueLocked(p.ConversationID, func(q []history.QueuedMessage) ([]history.QueuedMessage, error) {
		i, err := s.queueIndex(q, p.ConversationID, p.ID)
		if err != nil {
			return nil, err
		}
		return slices.Delete(q, i, i+1), nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return QueueResult{ConversationID: p.ConversationID, Items: q}, nil
}

// queueSendNow handles ochat/queue/sendNow (steer): the message moves to the
// head of the queue and the running turn is cancelled; its end sends it.
func (s *Server) queueSendNow(p QueueItemParams) (any, error) {
	s.qmu.Lock()
	q, err := s.changeQueueLocked(p.ConversationID, func(q []history.QueuedMessage) ([]history.QueuedMessage, error) {
		i, err := s.queueIndex(q, p.ConversationID, p.ID)
		if err != nil {
			return nil, err
		}
		m := q[i]
		return append([]history.QueuedMessage{m}, slices.Delete(q, i, i+1)...), nil
	}, nil)
	var r *run
	if err == nil {
		s.mu.Lock()
		if t := s.topics[p.ConversationID]; t != nil {
			r = t.run
		}
		s.mu.Unlock()
	}
	s.qmu.Unlock()
	if err != nil {
		return nil, err
	}
	if r == nil {
		go s.sendQueued(p.ConversationID)
		return QueueResult{ConversationID: p.ConversationID, Items: q}, nil
	}
	s.log.Info("send now: cancelling the running turn", "conversation", p.ConversationID, "queueId", p.ID)
	r.requestCancel()
	return QueueResult{ConversationID: p.ConversationID, Items: q, Cancelled: true}, nil
}

// forgetQueueLocked drops a deleted conversation's live queue (its stored one
// went with the conversation). s.mu is held.
func (s *Server) forgetQueueLocked(convID string) { delete(s.queues, convID) }

// failedRegistry stands in for a registry that could not be loaded when a
// queued message is sent: the turn fails with the reason instead of the
// message being lost.
type failedRegistry struct{ err error }

func (r failedRegistry) List() []agents.Status              { return nil }
func (r failedRegistry) Lookup(string) (agents.Spec, error) { return agents.Spec{}, r.err }
func (r failedRegistry) Default() string                    { return "" }
