// Session scenarios: a named session, the next available one (waiting, timing out, two at once),
// session state, FIFO order, parallel sessions, peek within a session, session lock renewal and
// expiry, releasing a session on close.
import { ServiceBusClient } from "@azure/service-bus";
import { assert, receiveExactly, run } from "./harness.mjs";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function send(client, messages) {
  const sender = client.createSender("sessions");
  await sender.sendMessages(messages);
  await sender.close();
}

async function drain(receiver, count) {
  const received = await receiveExactly(receiver, count);
  for (const message of received) await receiver.completeMessage(message);
  return received.map((message) => message.body);
}

await run({
  async "a named session receives its messages in order"(client) {
    const sender = client.createSender("sessions");
    const messages = [];
    for (let index = 0; index < 10; index += 1) {
      messages.push({ body: `step-${index}`, sessionId: index % 2 ? "odd" : "even" });
    }
    await sender.sendMessages(messages);
    await sender.close();
    const even = await client.acceptSession("sessions", "even");
    assert.equal(even.sessionId, "even");
    const received = await receiveExactly(even, 5);
    assert.deepEqual(received.map((m) => m.body), ["step-0", "step-2", "step-4", "step-6", "step-8"]);
    for (const message of received) await even.completeMessage(message);
    await even.close();
    const odd = await client.acceptNextSession("sessions");
    assert.equal(odd.sessionId, "odd");
    const rest = await receiveExactly(odd, 5);
    assert.deepEqual(rest.map((m) => m.body), ["step-1", "step-3", "step-5", "step-7", "step-9"]);
    for (const message of rest) await odd.completeMessage(message);
    await odd.close();
  },

  async "session state is kept between receivers"(client) {
    const sender = client.createSender("sessions");
    await sender.sendMessages({ body: "s", sessionId: "stateful" });
    await sender.close();
    const first = await client.acceptSession("sessions", "stateful");
    assert.equal(await first.getSessionState(), null);
    await first.setSessionState("checkpoint-1");
    const [message] = await receiveExactly(first, 1);
    await first.completeMessage(message);
    await first.close();
    const second = await client.acceptSession("sessions", "stateful");
    const state = await second.getSessionState();
    assert.equal(Buffer.from(state).toString(), "checkpoint-1");
    await second.setSessionState(null);
    await second.close();
  },

  async "a locked session cannot be accepted twice"(client) {
    const sender = client.createSender("sessions");
    await sender.sendMessages({ body: "x", sessionId: "exclusive" });
    await sender.close();
    const owner = await client.acceptSession("sessions", "exclusive");
    await assert.rejects(client.acceptSession("sessions", "exclusive", { maxAutoLockRenewalDurationInMs: 0 }), (error) => {
      assert.match(String(error.code ?? error.name), /SessionCannotBeLocked|ServiceBusError/);
      return true;
    });
    const [message] = await receiveExactly(owner, 1);
    await owner.completeMessage(message);
    await owner.close();
  },

  async "two sessions are processed in parallel, each receiver getting only its own"(client) {
    await send(client, [
      { body: "a1", sessionId: "a" },
      { body: "b1", sessionId: "b" },
      { body: "a2", sessionId: "a" },
      { body: "b2", sessionId: "b" },
    ]);
    const [a, b] = await Promise.all([client.acceptSession("sessions", "a"), client.acceptSession("sessions", "b")]);
    const [fromA, fromB] = await Promise.all([drain(a, 2), drain(b, 2)]);
    assert.deepEqual({ a: fromA, b: fromB }, { a: ["a1", "a2"], b: ["b1", "b2"] });
    await Promise.all([a.close(), b.close()]);
  },

  async "next available waits for a message; two waiting receivers get different sessions"(client) {
    const waiting = [client.acceptNextSession("sessions"), client.acceptNextSession("sessions")];
    await sleep(1000);
    await send(client, [
      { body: "late-1", sessionId: "late-1" },
      { body: "late-2", sessionId: "late-2" },
    ]);
    const receivers = await Promise.all(waiting);
    const bodies = await Promise.all(receivers.map((receiver) => drain(receiver, 1)));
    assert.deepEqual(receivers.map((receiver) => receiver.sessionId).sort(), ["late-1", "late-2"]);
    receivers.forEach((receiver, index) => assert.deepEqual(bodies[index], [receiver.sessionId]));
    await Promise.all(receivers.map((receiver) => receiver.close()));
  },

  async "next available with no session times out"() {
    const impatient = new ServiceBusClient(process.env.SERVICEBUS_CONNECTION, {
      retryOptions: { maxRetries: 0, timeoutInMs: 2000 },
    });
    try {
      await assert.rejects(impatient.acceptNextSession("sessions"), (error) => {
        assert.equal(error.code, "ServiceTimeout", String(error));
        return true;
      });
    } finally {
      await impatient.close();
    }
  },

  async "peek on a session receiver shows only that session, in order"(client) {
    await send(client, [
      { body: "p1", sessionId: "p" },
      { body: "q1", sessionId: "q" },
      { body: "p2", sessionId: "p" },
    ]);
    const p = await client.acceptSession("sessions", "p");
    assert.deepEqual((await p.peekMessages(10)).map((message) => message.body), ["p1", "p2"]);
    assert.deepEqual(await drain(p, 2), ["p1", "p2"]);
    await p.close();
    const q = await client.acceptSession("sessions", "q");
    assert.deepEqual(await drain(q, 1), ["q1"]);
    await q.close();
  },

  async "renewing the session lock keeps its messages locked past the lock duration"(client) {
    await send(client, { body: "slow step", sessionId: "long" });
    const receiver = await client.acceptSession("sessions", "long", { maxAutoLockRenewalDurationInMs: 0 });
    const before = receiver.sessionLockedUntilUtc.getTime();
    const [message] = await receiveExactly(receiver, 1);
    for (let step = 0; step < 6; step += 1) {
      await sleep(500); // 3 s in all, the lock is 2 s
      await receiver.renewSessionLock();
    }
    assert.ok(receiver.sessionLockedUntilUtc.getTime() > before);
    await receiver.completeMessage(message);
    assert.deepEqual(await receiver.receiveMessages(1, { maxWaitTimeInMs: 1000 }), []);
    await receiver.close();
  },

  async "an expired session lock fails the receiver with SessionLockLost"(client) {
    await send(client, { body: "x", sessionId: "abandoned" });
    const receiver = await client.acceptSession("sessions", "abandoned", { maxAutoLockRenewalDurationInMs: 0 });
    const [message] = await receiveExactly(receiver, 1);
    await sleep(3000);
    await assert.rejects(receiver.completeMessage(message), (error) => {
      assert.equal(error.code, "SessionLockLost", String(error));
      return true;
    });
    await receiver.close();
    const again = await client.acceptSession("sessions", "abandoned");
    assert.deepEqual(await drain(again, 1), ["x"]);
    await again.close();
  },

  async "closing a session receiver releases the session"(client) {
    await send(client, { body: "kept", sessionId: "handover" });
    const first = await client.acceptSession("sessions", "handover");
    await first.close();
    const second = await client.acceptSession("sessions", "handover");
    assert.deepEqual(await drain(second, 1), ["kept"]);
    await second.close();
  },
});
