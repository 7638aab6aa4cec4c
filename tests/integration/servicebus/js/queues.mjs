// Queue scenarios: send/receive/complete, broker-assigned ids, abandon, dead-letter with reason,
// peek, schedule + cancel, deferral, lock renewal, closing a receiver that holds a lock, batches,
// case-insensitive names.
import { assert, receiveExactly, run } from "./harness.mjs";

await run({
  async "send, receive and complete keep body and properties"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages({
      body: "hello",
      messageId: "js-1",
      subject: "greeting",
      contentType: "text/plain",
      correlationId: "c-1",
      applicationProperties: { tenant: "acme", attempt: 2, flag: true },
    });
    await sender.close();
    const receiver = client.createReceiver("work");
    const [message] = await receiveExactly(receiver, 1);
    assert.equal(message.body, "hello");
    assert.equal(message.messageId, "js-1");
    assert.equal(message.subject, "greeting");
    assert.equal(message.correlationId, "c-1");
    assert.deepEqual(message.applicationProperties, { tenant: "acme", attempt: 2, flag: true });
    assert.equal(message.deliveryCount, 0);
    assert.ok(message.sequenceNumber.toNumber() >= 1);
    assert.ok(message.lockedUntilUtc instanceof Date);
    await receiver.completeMessage(message);
    assert.deepEqual(await receiver.peekMessages(5), []);
    await receiver.close();
  },

  async "a message sent without id gets a 32-hex id and the receiver closes cleanly"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages([{ body: "a" }, { body: "b" }]);
    await sender.close();
    const receiver = client.createReceiver("work"); // auto lock renewal on (the SDK default)
    const messages = await receiveExactly(receiver, 2);
    for (const message of messages) assert.match(String(message.messageId), /^[0-9a-f]{32}$/);
    assert.notEqual(messages[0].messageId, messages[1].messageId);
    await receiver.completeMessage(messages[0]);
    await receiver.close(); // with messages[1] still locked: its lock renewer must stop cleanly
    const again = client.createReceiver("work");
    const [redelivered] = await receiveExactly(again, 1, 15000);
    assert.equal(redelivered.messageId, messages[1].messageId);
    await again.completeMessage(redelivered);
    await again.close();
  },

  async "abandon redelivers with a higher delivery count"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages({ body: "again" });
    await sender.close();
    const receiver = client.createReceiver("work");
    const [first] = await receiveExactly(receiver, 1);
    await receiver.abandonMessage(first);
    const [second] = await receiveExactly(receiver, 1);
    assert.equal(second.messageId, first.messageId);
    assert.equal(second.deliveryCount, 1);
    await receiver.completeMessage(second);
    await receiver.close();
  },

  async "dead-letter with reason and description"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages({ body: "poison" });
    await sender.close();
    const receiver = client.createReceiver("work");
    const [message] = await receiveExactly(receiver, 1);
    await receiver.deadLetterMessage(message, { deadLetterReason: "bad_input", deadLetterErrorDescription: "no" });
    await receiver.close();
    const dead = client.createReceiver("work", { subQueueType: "deadLetter" });
    const [letter] = await receiveExactly(dead, 1);
    assert.equal(letter.body, "poison");
    assert.equal(letter.deadLetterReason, "bad_input");
    assert.equal(letter.deadLetterErrorDescription, "no");
    await dead.completeMessage(letter);
    await dead.close();
  },

  async "peek shows messages without locking them"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages([{ body: "p1" }, { body: "p2" }]);
    await sender.close();
    const receiver = client.createReceiver("work");
    const peeked = await receiver.peekMessages(10);
    assert.deepEqual(peeked.map((m) => m.body), ["p1", "p2"]);
    const messages = await receiveExactly(receiver, 2);
    for (const message of messages) await receiver.completeMessage(message);
    await receiver.close();
  },

  async "schedule and cancel"(client) {
    const sender = client.createSender("work");
    const at = new Date(Date.now() + 3000);
    const [keep] = await sender.scheduleMessages({ body: "due" }, at);
    const [cancel] = await sender.scheduleMessages({ body: "cancelled" }, at);
    await sender.cancelScheduledMessages(cancel);
    await sender.close();
    const receiver = client.createReceiver("work");
    const [peeked] = await receiver.peekMessages(5);
    assert.equal(peeked.sequenceNumber.toString(), keep.toString());
    assert.ok(peeked.scheduledEnqueueTimeUtc instanceof Date);
    const [message] = await receiveExactly(receiver, 1, 15000);
    assert.equal(message.body, "due");
    assert.ok(Date.now() >= at.getTime() - 50);
    await receiver.completeMessage(message);
    assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1500 }), []);
    await receiver.close();
  },

  async "deferral: a deferred message is received by sequence number"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages({ body: "later" });
    await sender.close();
    const receiver = client.createReceiver("work");
    const [message] = await receiveExactly(receiver, 1);
    await receiver.deferMessage(message);
    assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
    const [deferred] = await receiver.receiveDeferredMessages(message.sequenceNumber);
    assert.equal(deferred.body, "later");
    await receiver.completeMessage(deferred);
    await receiver.close();
  },

  async "lock renewal moves the lock forward"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages({ body: "slow" });
    await sender.close();
    const receiver = client.createReceiver("work", { maxAutoLockRenewalDurationInMs: 0 });
    const [message] = await receiveExactly(receiver, 1);
    const before = message.lockedUntilUtc.getTime();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const renewed = await receiver.renewMessageLock(message);
    assert.ok(renewed.getTime() > before, `${renewed.toISOString()} is not after ${new Date(before).toISOString()}`);
    await new Promise((resolve) => setTimeout(resolve, 1500)); // past the first lock (2 s)
    await receiver.completeMessage(message);
    await receiver.close();
  },

  async "a batch is unpacked into its messages, in order"(client) {
    const sender = client.createSender("work");
    const batch = await sender.createMessageBatch();
    for (let index = 0; index < 25; index += 1) assert.ok(batch.tryAddMessage({ body: `item-${index}` }));
    await sender.sendMessages(batch);
    await sender.close();
    const receiver = client.createReceiver("work");
    const messages = await receiveExactly(receiver, 25);
    assert.deepEqual(
      messages.map((message) => message.body),
      Array.from({ length: 25 }, (_, index) => `item-${index}`),
    );
    for (const message of messages) await receiver.completeMessage(message);
    await receiver.close();
  },

  async "entity names are case-insensitive"(client) {
    const sender = client.createSender("WORK");
    await sender.sendMessages({ body: "upper" });
    await sender.close();
    const receiver = client.createReceiver("Work");
    const [message] = await receiveExactly(receiver, 1);
    assert.equal(message.body, "upper");
    await receiver.completeMessage(message);
    await receiver.close();
  },
});
