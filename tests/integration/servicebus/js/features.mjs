// Entity features through the JavaScript SDK, mirroring the Python suite: delivery limits, lock
// expiry, TTL, duplicate detection, forwarding, receive-and-delete, sizes, refusals.
import { assert, receiveExactly, run } from "./harness.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function send(client, entity, messages) {
  const sender = client.createSender(entity);
  await sender.sendMessages(messages);
  await sender.close();
}

async function takeOne(client, entity, options = {}) {
  const settles = options.receiveMode !== "receiveAndDelete"; // read first: the SDK rewrites options
  const receiver = client.createReceiver(entity, options);
  const [message] = await receiveExactly(receiver, 1, 15000);
  if (settles) await receiver.completeMessage(message);
  await receiver.close();
  return message;
}

await run({
  async "MaxDeliveryCount moves a message to the dead-letter queue"(client) {
    await send(client, "work", { body: "poison" });
    const receiver = client.createReceiver("work", { maxAutoLockRenewalDurationInMs: 0 });
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const [message] = await receiveExactly(receiver, 1);
      assert.equal(message.deliveryCount, attempt);
      await receiver.abandonMessage(message);
    }
    assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
    await receiver.close();
    const dead = await takeOne(client, "work", { subQueueType: "deadLetter" });
    assert.equal(dead.deadLetterReason, "MaxDeliveryCountExceeded");
  },

  async "an expired lock redelivers the message"(client) {
    await send(client, "work", { body: "slow" });
    const receiver = client.createReceiver("work", { maxAutoLockRenewalDurationInMs: 0 });
    const [first] = await receiveExactly(receiver, 1);
    await sleep(2600); // the queue's lock is 2 s
    const [second] = await receiveExactly(receiver, 1, 15000);
    assert.equal(second.messageId, first.messageId);
    assert.equal(second.deliveryCount, 1);
    await assert.rejects(receiver.completeMessage(first));
    await receiver.completeMessage(second);
    await receiver.close();
  },

  async "dead-lettered messages are forwarded with their reason"(client) {
    await send(client, "fragile", { body: "breaks once" });
    const receiver = client.createReceiver("fragile", { maxAutoLockRenewalDurationInMs: 0 });
    const [message] = await receiveExactly(receiver, 1);
    await receiver.abandonMessage(message);
    await receiver.close();
    const forwarded = await takeOne(client, "work");
    assert.equal(forwarded.body, "breaks once");
    assert.equal(forwarded.applicationProperties.DeadLetterReason, "MaxDeliveryCountExceeded");
  },

  async "a dead-letter queue message cannot be dead-lettered again"(client) {
    await send(client, "work", { body: "twice" });
    const receiver = client.createReceiver("work");
    const [message] = await receiveExactly(receiver, 1);
    await receiver.deadLetterMessage(message, { deadLetterReason: "First" });
    await receiver.close();
    const dlq = client.createReceiver("work", { subQueueType: "deadLetter" });
    const [dead] = await receiveExactly(dlq, 1);
    await assert.rejects(dlq.deadLetterMessage(dead, { deadLetterReason: "Second" }));
    await dlq.close();
    assert.equal((await takeOne(client, "work", { subQueueType: "deadLetter" })).deadLetterReason, "First");
  },

  async "TTL expiry dead-letters or drops as configured"(client) {
    await send(client, "expiring", { body: "stale" });
    await send(client, "expiring-drop", { body: "gone" });
    await sleep(2500); // the queues' default TTL is 1 s
    const dead = await takeOne(client, "expiring", { subQueueType: "deadLetter" });
    assert.equal(dead.deadLetterReason, "TTLExpiredException");
    const receiver = client.createReceiver("expiring-drop");
    assert.deepEqual(await receiver.peekMessages(5), []);
    await receiver.close();
    const dropped = client.createReceiver("expiring-drop", { subQueueType: "deadLetter" });
    assert.deepEqual(await dropped.peekMessages(5), []);
    await dropped.close();
  },

  async "duplicate detection drops a repeated message id on a queue and a topic"(client) {
    await send(client, "dedup", [{ body: "first", messageId: "same" }]);
    await send(client, "dedup", [{ body: "second", messageId: "same" }]);
    const receiver = client.createReceiver("dedup");
    const messages = await receiveExactly(receiver, 1);
    assert.equal(messages[0].body, "first");
    await receiver.completeMessage(messages[0]);
    assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
    await receiver.close();
    await send(client, "results", [{ body: "t1", messageId: "topic-same" }]);
    await send(client, "results", [{ body: "t2", messageId: "topic-same" }]);
    const audit = client.createReceiver("results", "audit");
    const [copy] = await receiveExactly(audit, 1);
    assert.equal(copy.body, "t1");
    await audit.completeMessage(copy);
    assert.deepEqual(await audit.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
    await audit.close();
  },

  async "ForwardTo moves a message to its target"(client) {
    await send(client, "inbox", { body: "forwarded" });
    assert.equal((await takeOne(client, "work")).body, "forwarded");
  },

  async "receive-and-delete removes the message on delivery"(client) {
    await send(client, "work", { body: "once" });
    const message = await takeOne(client, "work", { receiveMode: "receiveAndDelete" });
    assert.equal(message.body, "once");
    const receiver = client.createReceiver("work");
    assert.deepEqual(await receiver.peekMessages(5), []);
    await receiver.close();
  },

  async "a large message spans many frames both ways; an oversized one is refused"(client) {
    const large = Buffer.alloc(200 * 1024, 7);
    await send(client, "work", { body: large });
    const received = await takeOne(client, "work");
    assert.ok(Buffer.from(received.body).equals(large));
    await assert.rejects(send(client, "work", { body: Buffer.alloc(300 * 1024, 1) }));
  },

  async "refusals: unknown entity, session queue without session id"(client) {
    await assert.rejects(send(client, "missing-entity", { body: "x" }), (error) => {
      assert.equal(error.code, "MessagingEntityNotFound");
      return true;
    });
    await assert.rejects(send(client, "sessions", { body: "no session" }));
  },

  async "a session subscription gets the copies that carry a session id"(client) {
    await send(client, "results", [{ body: "in session", sessionId: "wi-1", messageId: "s-1" }]);
    const receiver = await client.acceptSession("results", "per-item", "wi-1");
    const [message] = await receiveExactly(receiver, 1);
    assert.equal(message.body, "in session");
    await receiver.completeMessage(message);
    await receiver.close();
  },
});
