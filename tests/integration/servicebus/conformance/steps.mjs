// The conformance steps through the JavaScript SDK, on entities they create (unique names) and
// delete: SERVICEBUS_CONNECTION is the target's data plane, SERVICEBUS_MANAGEMENT_CONNECTION its
// management plane (the same string on Azure). One PASS/FAIL line per step.
import { randomUUID } from "node:crypto";
import { ServiceBusAdministrationClient } from "@azure/service-bus";
import { assert, receiveExactly, run } from "../js/harness.mjs";

const admin = new ServiceBusAdministrationClient(process.env.SERVICEBUS_MANAGEMENT_CONNECTION);
const prefix = `conformance-js-${randomUUID().slice(0, 8)}`;

async function withQueue(suffix, options, body) {
  const name = `${prefix}-${suffix}`;
  await admin.createQueue(name, options);
  try {
    await body(name);
  } finally {
    await admin.deleteQueue(name);
  }
}

await run({
  async "send, receive, complete"(client) {
    await withQueue("q", {}, async (queue) => {
      const sender = client.createSender(queue);
      await sender.sendMessages([{ body: "m0" }, { body: "m1" }]);
      await sender.close();
      const receiver = client.createReceiver(queue);
      const received = await receiveExactly(receiver, 2);
      for (const message of received) await receiver.completeMessage(message);
      assert.deepEqual(received.map((message) => message.body), ["m0", "m1"]);
      assert.deepEqual(await receiver.peekMessages(10), []);
      await receiver.close();
    });
  },

  async "dead-letter keeps reason and description"(client) {
    await withQueue("dlq", {}, async (queue) => {
      const sender = client.createSender(queue);
      await sender.sendMessages({ body: "bad" });
      await sender.close();
      const receiver = client.createReceiver(queue);
      const [message] = await receiveExactly(receiver, 1);
      await receiver.deadLetterMessage(message, { deadLetterReason: "Invalid", deadLetterErrorDescription: "no" });
      await receiver.close();
      const dead = client.createReceiver(queue, { subQueueType: "deadLetter" });
      const [found] = await receiveExactly(dead, 1);
      assert.equal(found.deadLetterReason, "Invalid");
      assert.equal(found.deadLetterErrorDescription, "no");
      await dead.completeMessage(found);
      await dead.close();
    });
  },

  async "a session keeps order and state"(client) {
    await withQueue("s", { requiresSession: true }, async (queue) => {
      const sender = client.createSender(queue);
      await sender.sendMessages([0, 1, 2].map((n) => ({ body: `s${n}`, sessionId: "a" })));
      await sender.close();
      const receiver = await client.acceptSession(queue, "a");
      const received = await receiveExactly(receiver, 3);
      assert.deepEqual(received.map((message) => message.body), ["s0", "s1", "s2"]);
      await receiver.setSessionState("step 3");
      assert.equal(String(await receiver.getSessionState()), "step 3");
      for (const message of received) await receiver.completeMessage(message);
      await receiver.close();
    });
  },

  async "a subscription rule filters and acts"(client) {
    const topic = `${prefix}-t`;
    await admin.createTopic(topic);
    try {
      await admin.createSubscription(topic, "high");
      await admin.deleteRule(topic, "high", "$Default");
      await admin.createRule(topic, "high", "priority", { sqlExpression: "priority = 'high'" }, {
        sqlExpression: "SET sys.Label = 'urgent'",
      });
      const sender = client.createSender(topic);
      await sender.sendMessages([
        { body: "low", applicationProperties: { priority: "low" } },
        { body: "high", applicationProperties: { priority: "high" } },
      ]);
      await sender.close();
      const receiver = client.createReceiver(topic, "high");
      const [message] = await receiveExactly(receiver, 1);
      assert.equal(message.body, "high");
      assert.equal(message.subject, "urgent");
      await receiver.completeMessage(message);
      await receiver.close();
    } finally {
      await admin.deleteTopic(topic);
    }
  },

  async "management refusals"() {
    await withQueue("m", {}, async (queue) => {
      await assert.rejects(admin.createQueue(queue), (error) => error.statusCode === 409);
      await assert.rejects(admin.getQueue(`${queue}-missing`), (error) => error.statusCode === 404);
      await assert.rejects(admin.createQueue(`${queue}-lock`, { lockDuration: "PT4S" }), (error) => error.statusCode === 400);
    });
  },
});
