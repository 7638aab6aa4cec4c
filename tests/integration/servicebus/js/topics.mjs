// Topic scenarios: subscriptions with SQL filters and actions, correlation filters, the $Default rule,
// a subscription's dead-letter queue.
import { assert, receiveExactly, run } from "./harness.mjs";

async function drain(client, subscription, expected) {
  const receiver = client.createReceiver("results", subscription);
  const messages = expected ? await receiveExactly(receiver, expected) : [];
  for (const message of messages) await receiver.completeMessage(message);
  assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
  await receiver.close();
  return messages;
}

await run({
  async "SQL filter with action, correlation filter and $Default"(client) {
    const sender = client.createSender("results");
    await sender.sendMessages([
      { body: "urgent", messageId: "m-high", applicationProperties: { priority: "high" } },
      { body: "routine", messageId: "m-low", applicationProperties: { priority: "low" } },
      { body: "contract", messageId: "m-contract", applicationProperties: { document_type: "contract" } },
    ]);
    await sender.close();
    const notifications = await drain(client, "notifications", 1);
    assert.equal(notifications[0].body, "urgent");
    assert.equal(notifications[0].subject, "urgent"); // SET sys.Label = 'urgent'
    const contracts = await drain(client, "contracts", 1);
    assert.equal(contracts[0].messageId, "m-contract");
    const audit = await drain(client, "audit", 3);
    assert.deepEqual(audit.map((m) => m.messageId).sort(), ["m-contract", "m-high", "m-low"]);
    await drain(client, "review", 0);
  },

  async "a scheduled topic message reaches its subscription when due"(client) {
    const sender = client.createSender("results");
    const [sequence] = await sender.scheduleMessages({ body: "later", messageId: "m-later" }, new Date(Date.now() + 2000));
    assert.ok(sequence.toNumber() >= 1);
    await sender.close();
    const receiver = client.createReceiver("results", "audit");
    const [message] = await receiveExactly(receiver, 1, 15000);
    assert.equal(message.messageId, "m-later");
    await receiver.completeMessage(message);
    await receiver.close();
  },

  async "a subscription has its own dead-letter queue"(client) {
    const sender = client.createSender("results");
    await sender.sendMessages({ body: "bad result" });
    await sender.close();
    const receiver = client.createReceiver("results", "audit");
    const [message] = await receiveExactly(receiver, 1);
    await receiver.deadLetterMessage(message, { deadLetterReason: "Unprocessable", deadLetterErrorDescription: "bad" });
    await receiver.close();
    const dlq = client.createReceiver("results", "audit", { subQueueType: "deadLetter" });
    const [dead] = await receiveExactly(dlq, 1);
    assert.equal(dead.body, "bad result");
    assert.equal(dead.deadLetterReason, "Unprocessable");
    await dlq.completeMessage(dead);
    await dlq.close();
  },
});
