// Session scenarios: a named session, the next available one, session state, FIFO order.
import { assert, receiveExactly, run } from "./harness.mjs";

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
});
